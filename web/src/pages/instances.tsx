import { useEffect, useState } from 'preact/hooks';
import { api, type InstanceSummary, type Me, statusText, statusTone } from '../api.ts';
import { Badge, messageOf, Notice, ScrollBox, Section, Time, useAction, useLatestRead } from '../ui.tsx';
import { HealthPanel } from './health.tsx';

/**
 * Every instance of the organization with its state (a badge), linked number and latest event, and the
 * organization's health charts; members create new ones.
 */
export function InstancesPage(props: { me: Me }) {
  const [instances, setInstances] = useState<InstanceSummary[] | null>(null);
  const [lastEvents, setLastEvents] = useState<Record<string, { type: string; at: string }>>({});
  const [loadError, setLoadError] = useState<string | null>(null);
  const [name, setName] = useState('');
  const [env, setEnv] = useState<'test' | 'live'>('test');
  const create = useAction();
  const canManage = props.me.user.role !== 'viewer';
  // The list is read when the page opens and again after a creation: only the latest started read is shown, so a
  // slow first read answering last never hides the instance just created.
  const beginRead = useLatestRead();
  const load = () => {
    const latest = beginRead();
    return api<{ instances: InstanceSummary[]; lastEvents?: Record<string, { type: string; at: string }> }>(
      'GET',
      '/instances',
    )
      .then((data) => {
        if (!latest()) return;
        setInstances(data.instances);
        setLastEvents(data.lastEvents ?? {});
        setLoadError(null);
      })
      .catch((e) => {
        if (latest()) setLoadError(messageOf(e));
      });
  };
  useEffect(() => {
    void load();
  }, []);
  const submit = async (event: Event) => {
    event.preventDefault();
    const made = await create.run(
      () =>
        api<InstanceSummary>('POST', '/instances', { env, ...(name.trim() ? { name: name.trim() } : {}) }),
      (value) => `Instance ${value.name} created`,
    );
    if (made) {
      setName('');
      await load();
    }
  };
  return (
    <>
      <h1 tabIndex={-1}>Instances</h1>
      <Notice error={loadError} />
      <ScrollBox label="Instances, table">
        <table>
          <caption>One linked WhatsApp number per instance</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Environment</th>
              <th scope="col">Linked number</th>
              <th scope="col">Status</th>
              <th scope="col">Last connected</th>
              <th scope="col">Last event</th>
            </tr>
          </thead>
          <tbody>
            {(instances ?? []).map((instance) => (
              <tr key={instance.id}>
                <td>
                  <a href={`#/instances/${instance.id}`}>{instance.name}</a>
                </td>
                <td>{instance.env}</td>
                <td>{instance.phone ?? 'not linked'}</td>
                <td>
                  <Badge tone={statusTone(instance)}>{statusText(instance)}</Badge>
                  {instance.reason ? ` ${instance.reason}` : ''}
                </td>
                <td>
                  <Time value={instance.lastConnectedAt} />
                </td>
                <td>
                  {lastEvents[instance.id] ? (
                    <>
                      {lastEvents[instance.id]?.type} · <Time value={lastEvents[instance.id]?.at} />
                    </>
                  ) : (
                    'none yet'
                  )}
                </td>
              </tr>
            ))}
            {instances?.length === 0 && (
              <tr>
                <td colSpan={6}>No instances yet.</td>
              </tr>
            )}
          </tbody>
        </table>
      </ScrollBox>
      {instances && instances.length > 0 && (
        <HealthPanel names={Object.fromEntries(instances.map((instance) => [instance.id, instance.name]))} />
      )}
      {canManage && (
        <Section title="Create an instance">
          <form onSubmit={submit} class="row">
            <div>
              <label for="instance-name">Name</label>
              <input
                id="instance-name"
                maxLength={60}
                value={name}
                onInput={(e) => setName(e.currentTarget.value)}
              />
            </div>
            <div>
              <label for="instance-env">Environment</label>
              <select
                id="instance-env"
                value={env}
                onChange={(e) => setEnv(e.currentTarget.value === 'live' ? 'live' : 'test')}
              >
                <option value="test">test (sandbox)</option>
                <option value="live">live (WhatsApp)</option>
              </select>
            </div>
            <button type="submit" disabled={create.busy}>
              Create instance
            </button>
          </form>
          <Notice error={create.error} ok={create.ok} />
        </Section>
      )}
    </>
  );
}
