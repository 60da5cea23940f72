import { useEffect, useState } from 'preact/hooks';
import { api, duration } from '../api.ts';
import { messageOf, Notice, useLatestRead } from '../ui.tsx';

interface Window {
  name: 'minute' | 'day';
  quota: number;
  remaining: number;
  reset: number;
}
interface Usage {
  plan: string;
  perMinute: number;
  perDay: number;
  maxInstances: number;
  usage: { env: 'test' | 'live'; windows: Window[]; instances: number }[];
}

/** Requests used in the plan's minute and day windows, per environment (test traffic never eats live quota). */
export function UsagePage() {
  const [usage, setUsage] = useState<Usage | null>(null);
  const [error, setError] = useState<string | null>(null);
  // Refresh may be pressed while a read is on its way: only the latest started read is shown, so the counts never go
  // back to an older read's, nor does its error show over them.
  const beginRead = useLatestRead();
  const load = () => {
    const latest = beginRead();
    return api<Usage>('GET', '/usage')
      .then((value) => {
        if (!latest()) return;
        setUsage(value);
        setError(null);
      })
      .catch((e) => {
        if (latest()) setError(messageOf(e));
      });
  };
  useEffect(() => {
    void load();
  }, []);
  return (
    <>
      <h1 tabIndex={-1}>Usage</h1>
      <Notice error={error} />
      {usage && (
        <>
          <p>
            Plan <strong>{usage.plan}</strong>: {usage.perMinute} requests a minute, {usage.perDay} a day,
            counted separately for test and live keys, and up to {usage.maxInstances} instances in each
            environment.
          </p>
          {usage.usage.map((env) => (
            <section class="card" key={env.env} aria-label={`${env.env} usage`}>
              <h2>{env.env === 'test' ? 'Test keys' : 'Live keys'}</h2>
              <p>
                Instances: {env.instances} of {usage.maxInstances}
              </p>
              {env.windows.map((w) => {
                const used = w.quota - w.remaining;
                const id = `usage-${env.env}-${w.name}`;
                return (
                  <div class="meter" key={w.name}>
                    <label for={id}>
                      This {w.name}: {used} of {w.quota} used
                      {used > 0 ? `, resets in ${duration(w.reset)}` : ''}
                    </label>
                    <progress id={id} max={w.quota} value={used} />
                  </div>
                );
              })}
            </section>
          ))}
          <button type="button" onClick={load}>
            Refresh
          </button>
        </>
      )}
    </>
  );
}
