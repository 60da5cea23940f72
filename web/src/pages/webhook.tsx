import { useEffect, useState } from 'preact/hooks';
import { api, when } from '../api.ts';
import { messageOf, Notice, Section, useAction } from '../ui.tsx';

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
/** One HTTP attempt of a delivery, as the delivery log answers it. */
export interface Attempt {
  number: number;
  at: string;
  statusCode: number | null;
  durationMs: number | null;
  error: string | null;
  responseBody: string | null;
}
/** One event of a delivery log with its delivery state and attempts. */
export interface Delivery {
  id: string;
  type: string;
  sequence: number;
  status: string;
  reason: string | null;
  createdAt: string;
  attempts: Attempt[];
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
  const [deliveries, setDeliveries] = useState<Delivery[]>([]);
  const [logError, setLogError] = useState<string | null>(null);
  const action = useAction();
  const loadConfig = async () => {
    const value = await api<Config>('GET', `${base}/webhook`);
    setConfig(value);
    setUrl(value.webhook);
    setSubscribe(value.subscribe);
  };
  const loadLog = () =>
    api<{ deliveries: Delivery[] }>('GET', `${base}/deliveries?limit=20`)
      .then((page) => {
        setDeliveries(page.deliveries);
        setLogError(null);
      })
      .catch((e) => setLogError(messageOf(e)));
  useEffect(() => {
    void loadConfig().catch((e) => setLogError(messageOf(e)));
  }, [props.id]);
  useEffect(() => {
    void loadLog();
  }, [props.id, props.version]);

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
  const test = () =>
    action.run(
      () => api<{ statusCode: number | null; error: string | null }>('POST', `${base}/webhook/test`),
      (r) =>
        r.error ? `Test event failed: ${r.error}` : `Test event delivered: receiver answered ${r.statusCode}`,
    );
  const redeliver = (id: string) =>
    action.run(() => api('POST', `${base}/deliveries/${id}/redeliver`), 'Redelivery queued');

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
      <DeliveryTable
        caption="Webhook deliveries, newest first"
        attribute="delivery"
        deliveries={deliveries}
        onRedeliver={props.canManage ? redeliver : undefined}
      />
    </Section>
  );
}

/**
 * A delivery log, newest first: each event's sequence, type, status (with why an unsent one was not queued), every
 * attempt (status code, duration, error, the start of the response) and, when `onRedeliver` is given (a member), a
 * Redeliver button. Each row carries `data-<attribute>` = the event id, so the default webhook's rows and an
 * endpoint's rows are told apart.
 */
export function DeliveryTable(props: {
  caption: string;
  attribute: 'delivery' | 'endpoint-delivery';
  deliveries: Delivery[];
  onRedeliver?: ((id: string) => unknown) | undefined;
}) {
  const { onRedeliver } = props;
  return (
    <table>
      <caption class="visually-hidden">{props.caption}</caption>
      <thead>
        <tr>
          <th scope="col">#</th>
          <th scope="col">Event</th>
          <th scope="col">Status</th>
          <th scope="col">Attempts</th>
          <th scope="col">Created</th>
          {onRedeliver && <th scope="col">Action</th>}
        </tr>
      </thead>
      <tbody>
        {props.deliveries.map((d) => (
          <tr key={d.id} {...{ [`data-${props.attribute}`]: d.id }}>
            <td>{d.sequence}</td>
            <td>{d.type}</td>
            <td class={`status-${d.status}`}>
              {d.status}
              {d.reason ? ` (${d.reason})` : ''}
            </td>
            <td>
              {d.attempts.length === 0
                ? 'none'
                : d.attempts.map((a) => (
                    <details key={a.number}>
                      <summary>
                        Attempt {a.number}: {a.statusCode ?? 'no answer'}
                        {a.durationMs === null ? '' : ` in ${a.durationMs} ms`}
                      </summary>
                      <p>{when(a.at)}</p>
                      {a.error && <p>Error: {a.error}</p>}
                      {a.responseBody && <pre>{a.responseBody}</pre>}
                    </details>
                  ))}
            </td>
            <td>{when(d.createdAt)}</td>
            {onRedeliver && (
              <td>
                <button
                  type="button"
                  onClick={() => onRedeliver(d.id)}
                  aria-label={`Redeliver event ${d.sequence}`}
                >
                  Redeliver
                </button>
              </td>
            )}
          </tr>
        ))}
        {props.deliveries.length === 0 && (
          <tr>
            <td colSpan={6}>No events yet.</td>
          </tr>
        )}
      </tbody>
    </table>
  );
}
