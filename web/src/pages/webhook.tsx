import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { messageOf, Notice, Section, useAction, useLatestRead } from '../ui.tsx';
import { DeliveryLog } from './delivery-log.tsx';

/** The types offered when the server does not list them (an older server): the four of the default subscription. */
const DEFAULT_TYPES = ['Message', 'ReadReceipt', 'HistorySync', 'ChatPresence'];

interface Config {
  webhook: string;
  subscribe: string[];
  /** Every event type a subscription may name, in the server's canonical order. */
  eventTypes?: string[];
  disabled: boolean;
  disabledReason: string | null;
  hasHmacKey: boolean;
}
/**
 * The webhook of an instance: URL, subscription, HMAC key, a test event, and the delivery log (reloaded when the
 * server says a delivery changed: `version` counts those pushes) with every attempt and redelivery.
 */
export function WebhookPanel(props: { id: string; canManage: boolean; version: number }) {
  const base = `/instances/${props.id}`;
  const [config, setConfig] = useState<Config | null>(null);
  const [url, setUrl] = useState('');
  const [subscribe, setSubscribe] = useState<string[]>([]);
  const [hmacKey, setHmacKey] = useState('');
  const [logError, setLogError] = useState<string | null>(null);
  const action = useAction();
  // Reads overlap (the first read still on its way when an action reads again, another instance picked): only the
  // latest started one is shown, so the form never holds the settings of an earlier read or another instance.
  const beginRead = useLatestRead();
  const readConfig = async (latest: () => boolean) => {
    const value = await api<Config>('GET', `${base}/webhook`);
    if (!latest()) return;
    setConfig(value);
    setUrl(value.webhook);
    setSubscribe(value.subscribe);
    setLogError(null);
  };
  const loadConfig = () => readConfig(beginRead());
  useEffect(() => {
    // Another instance: nothing of the previous one's settings stays in the form while this one's are read.
    setConfig(null);
    setUrl('');
    setSubscribe([]);
    setHmacKey('');
    setLogError(null);
    const latest = beginRead();
    void readConfig(latest).catch((e) => {
      if (latest()) setLogError(messageOf(e));
    });
  }, [props.id]);

  const submit = (handler: () => Promise<unknown>) => (event: Event) => {
    event.preventDefault();
    void handler();
  };
  const saveUrl = () =>
    action.run(
      () => api('PUT', `${base}/webhook`, { webhookUrl: url }).then(loadConfig),
      'Webhook URL saved',
    );
  const removeUrl = () =>
    action.run(() => api('DELETE', `${base}/webhook`).then(loadConfig), 'Webhook URL removed');
  const saveSubscription = () =>
    action.run(() => api('PUT', `${base}/subscribe`, { subscribe }).then(loadConfig), 'Subscription saved');
  const setKey = () =>
    action.run(async () => {
      await api('PUT', `${base}/hmac`, { hmacKey });
      setHmacKey('');
      await loadConfig();
    }, 'HMAC key set: deliveries are signed');
  const removeKey = () =>
    action.run(() => api('DELETE', `${base}/hmac`).then(loadConfig), 'HMAC key removed');
  // A failed test event is shown as the error it is, not as a success notice.
  const test = () =>
    action.run(
      async () => {
        const r = await api<{ statusCode: number | null; error: string | null }>(
          'POST',
          `${base}/webhook/test`,
        );
        if (r.error) throw new Error(`Test event failed: ${r.error}`);
        return r;
      },
      (r) => `Test event delivered: receiver answered ${r.statusCode}`,
    );

  return (
    <Section title="Webhook">
      {config?.disabled && (
        <p role="alert">Disabled: {config.disabledReason}. Save the URL again to re-enable it.</p>
      )}
      {props.canManage && (
        <>
          <form class="row" onSubmit={submit(saveUrl)}>
            <div class="grow">
              <label for="webhook-url">Webhook URL (HTTPS)</label>
              <input id="webhook-url" type="url" value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
            </div>
            <button type="submit" disabled={action.busy}>
              Save URL
            </button>
            <button type="button" disabled={action.busy || !config?.webhook} onClick={removeUrl}>
              Remove URL
            </button>
            <button type="button" disabled={action.busy || !config?.webhook} onClick={test}>
              Send test event
            </button>
          </form>
          <form onSubmit={submit(saveSubscription)}>
            <fieldset>
              <legend>Events sent</legend>
              {(config?.eventTypes ?? DEFAULT_TYPES).map((type) => (
                <label key={type} class="check">
                  <input
                    type="checkbox"
                    checked={subscribe.includes(type)}
                    onChange={(e) =>
                      setSubscribe(
                        e.currentTarget.checked ? [...subscribe, type] : subscribe.filter((t) => t !== type),
                      )
                    }
                  />
                  {type}
                </label>
              ))}
              <button type="submit" disabled={action.busy}>
                Save subscription
              </button>
            </fieldset>
          </form>
          <form class="row" onSubmit={submit(setKey)}>
            <div class="grow">
              <label for="hmac-key">
                HMAC signing key (at least 32 characters)
                {config?.hasHmacKey ? ' — a key is set' : ' — none set'}
              </label>
              <input
                id="hmac-key"
                type="password"
                autocomplete="off"
                minLength={32}
                value={hmacKey}
                onInput={(e) => setHmacKey(e.currentTarget.value)}
              />
            </div>
            <button type="submit" disabled={action.busy}>
              Set HMAC key
            </button>
            <button type="button" disabled={action.busy || !config?.hasHmacKey} onClick={removeKey}>
              Remove HMAC key
            </button>
          </form>
          <Notice error={action.error} ok={action.ok} />
        </>
      )}
      <h3>Delivery log</h3>
      <Notice error={logError} />
      <DeliveryLog
        path={`${base}/deliveries`}
        caption="Webhook deliveries, newest first"
        attribute="delivery"
        types={config?.eventTypes ?? DEFAULT_TYPES}
        canManage={props.canManage}
        version={props.version}
      />
    </Section>
  );
}
