import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import {
  Badge,
  ConfirmButton,
  messageOf,
  Notice,
  ScrollBox,
  Section,
  Time,
  useAction,
  useLatestRead,
} from '../ui.tsx';
import { DeliveryLog } from './delivery-log.tsx';

/** A webhook endpoint as the dashboard API answers it (docs/api.md#webhook-endpoints): never its secret. */
interface Endpoint {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  disabledAt: string | null;
  disabledReason: string | null;
  createdAt: string;
  updatedAt: string;
}
/** The answer of creation and rotation: the endpoint with its secret, shown this once. */
interface EndpointWithSecret extends Endpoint {
  secret: string;
}
/** A secret on show: whose, and whether it is new or replaced one. */
interface ShownSecret {
  url: string;
  value: string;
  rotated: boolean;
}

/**
 * The extra webhook endpoints of an instance (docs/decisions/0035-webhook-endpoints.md, docs/dashboard.md): a table
 * (URL, events, description, enabled or why a 410 disabled it), a form to add one (URL, event checkboxes from the
 * server's list, description), the `whsec_` secret shown once after creation or rotation with a copy button,
 * enable/disable, delete after a confirmation dialog, and each endpoint's delivery log with redelivery (reloaded when the
 * server says a delivery changed: `version` counts those pushes). A viewer sees the table and the logs only.
 */
export function EndpointsPanel(props: { id: string; canManage: boolean; version: number }) {
  const base = `/instances/${props.id}/endpoints`;
  const [endpoints, setEndpoints] = useState<Endpoint[]>([]);
  const [eventTypes, setEventTypes] = useState<string[]>([]);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<string[]>(['Message']);
  const [description, setDescription] = useState('');
  const [secret, setSecret] = useState<ShownSecret | null>(null);
  const [copied, setCopied] = useState<string | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const action = useAction();
  // Reads overlap (a push, an action's reload, another instance picked, while a read is on its way): only the latest
  // started one is shown, so an older list never brings back an endpoint's earlier state or another instance's.
  const beginRead = useLatestRead();
  const load = () => {
    const latest = beginRead();
    return api<{ endpoints: Endpoint[]; eventTypes: string[] }>('GET', base)
      .then((data) => {
        if (!latest()) return;
        setEndpoints(data.endpoints);
        setEventTypes(data.eventTypes);
        setLoadError(null);
      })
      .catch((e) => {
        if (latest()) setLoadError(messageOf(e));
      });
  };
  useEffect(() => {
    // Another instance: none of the previous one's endpoints (whose buttons would act on this one) nor the secret
    // just shown for one of them stays while this one's are read.
    setOpen(null);
    setEndpoints([]);
    setSecret(null);
    setCopied(null);
    setLoadError(null);
  }, [props.id]);
  // Also on each pushed delivery change: a 410 Gone may have disabled an endpoint meanwhile.
  useEffect(() => {
    void load();
  }, [props.id, props.version]);

  const show = (endpoint: EndpointWithSecret, rotated: boolean) => {
    setCopied(null);
    setSecret({ url: endpoint.url, value: endpoint.secret, rotated });
  };
  const add = async (event: Event) => {
    event.preventDefault();
    const made = await action.run(
      () =>
        api<EndpointWithSecret>('POST', base, {
          url,
          events,
          ...(description.trim() ? { description: description.trim() } : {}),
        }),
      'Endpoint added',
    );
    if (!made) return;
    show(made, false);
    setUrl('');
    setDescription('');
    setEvents(['Message']);
    await load();
  };
  const setEnabled = (endpoint: Endpoint, enabled: boolean) =>
    action.run(
      () => api('PATCH', `${base}/${endpoint.id}`, { enabled }).then(load),
      enabled ? `Endpoint ${endpoint.url} enabled` : `Endpoint ${endpoint.url} disabled`,
    );
  const rotate = async (endpoint: Endpoint) => {
    const made = await action.run(
      () => api<EndpointWithSecret>('POST', `${base}/${endpoint.id}/rotate-secret`),
      'Secret rotated: for 24 hours deliveries are signed with the new one and the old one, then with the new one only',
    );
    if (made) show(made, true);
  };
  const remove = async (endpoint: Endpoint) => {
    await action.run(async () => {
      await api('DELETE', `${base}/${endpoint.id}`);
      if (open === endpoint.id) setOpen(null);
      await load();
    }, `Endpoint ${endpoint.url} deleted`);
  };
  const copy = async () => {
    if (!secret) return;
    try {
      await navigator.clipboard.writeText(secret.value);
      setCopied('Copied to the clipboard');
    } catch {
      setCopied('Copying failed: select the secret and copy it by hand');
    }
  };
  const shownLog = endpoints.find((endpoint) => endpoint.id === open);

  return (
    <Section title="Webhook endpoints">
      <p>
        Up to 10 more receivers besides the webhook above, each with its own events and its own Standard
        Webhooks secret.
      </p>
      <Notice error={loadError} />
      <ScrollBox label="Webhook endpoints, table">
        <table>
          <caption class="visually-hidden">Webhook endpoints, oldest first</caption>
          <thead>
            <tr>
              <th scope="col">URL</th>
              <th scope="col">Events</th>
              <th scope="col">Description</th>
              <th scope="col">State</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {endpoints.map((endpoint) => (
              <tr key={endpoint.id} data-endpoint={endpoint.id}>
                <td class="mono">{endpoint.url}</td>
                <td>{endpoint.events.join(', ')}</td>
                <td>{endpoint.description ?? '—'}</td>
                <td>
                  {endpoint.enabled ? (
                    <Badge tone="ok">Enabled</Badge>
                  ) : endpoint.disabledReason ? (
                    <>
                      <Badge tone="bad">Disabled</Badge>: {endpoint.disabledReason} (
                      <Time value={endpoint.disabledAt} />)
                    </>
                  ) : (
                    <Badge tone="off">Disabled</Badge>
                  )}
                </td>
                <td>
                  <div class="row">
                    <button
                      type="button"
                      aria-pressed={open === endpoint.id}
                      onClick={() => setOpen(open === endpoint.id ? null : endpoint.id)}
                    >
                      Deliveries
                    </button>
                    {props.canManage && (
                      <>
                        <button
                          type="button"
                          disabled={action.busy}
                          onClick={() => setEnabled(endpoint, !endpoint.enabled)}
                        >
                          {endpoint.enabled ? 'Disable' : 'Enable'}
                        </button>
                        <button type="button" disabled={action.busy} onClick={() => rotate(endpoint)}>
                          Rotate secret
                        </button>
                        <ConfirmButton
                          label="Delete"
                          ariaLabel={`Delete endpoint ${endpoint.url}`}
                          title={`Delete the endpoint ${endpoint.url}?`}
                          confirmLabel="Delete endpoint"
                          disabled={action.busy}
                          onConfirm={() => remove(endpoint)}
                        >
                          Its queued deliveries are deleted with it, and nothing more is sent to{' '}
                          {endpoint.url}. This cannot be undone.
                        </ConfirmButton>
                      </>
                    )}
                  </div>
                </td>
              </tr>
            ))}
            {endpoints.length === 0 && (
              <tr>
                <td colSpan={5}>No endpoints yet.</td>
              </tr>
            )}
          </tbody>
        </table>
      </ScrollBox>
      {props.canManage && (
        <>
          {secret && (
            <section class="secret" aria-label="Endpoint secret">
              <label for="endpoint-secret">
                {secret.rotated ? 'New signing secret' : 'Signing secret'} of {secret.url}: shown only this
                once, store it now
              </label>
              <div class="row">
                <input
                  id="endpoint-secret"
                  class="grow mono"
                  readOnly
                  value={secret.value}
                  onFocus={(e) => e.currentTarget.select()}
                />
                <button type="button" onClick={copy}>
                  Copy secret
                </button>
                <button type="button" onClick={() => setSecret(null)}>
                  Done
                </button>
              </div>
              <Notice ok={copied} />
            </section>
          )}
          <form onSubmit={add}>
            <h3>Add an endpoint</h3>
            <div class="row">
              <div class="grow">
                <label for="endpoint-url">Endpoint URL (https://, amqp(s):// or nats://)</label>
                <input
                  id="endpoint-url"
                  type="url"
                  placeholder="https://example.com/hook"
                  required
                  value={url}
                  onInput={(e) => setUrl(e.currentTarget.value)}
                />
              </div>
              <div class="grow">
                <label for="endpoint-description">Endpoint description (optional)</label>
                <input
                  id="endpoint-description"
                  maxLength={500}
                  value={description}
                  onInput={(e) => setDescription(e.currentTarget.value)}
                />
              </div>
            </div>
            <fieldset>
              <legend>Endpoint events</legend>
              {eventTypes.map((type) => (
                <label key={type} class="check">
                  <input
                    type="checkbox"
                    checked={events.includes(type)}
                    onChange={(e) =>
                      setEvents(
                        e.currentTarget.checked ? [...events, type] : events.filter((t) => t !== type),
                      )
                    }
                  />
                  {type}
                </label>
              ))}
            </fieldset>
            <button type="submit" disabled={action.busy}>
              Add endpoint
            </button>
          </form>
          <Notice error={action.error} ok={action.ok} />
        </>
      )}
      {shownLog && (
        <>
          <h3>Deliveries to {shownLog.url}</h3>
          <DeliveryLog
            path={`${base}/${shownLog.id}/deliveries`}
            caption={`Deliveries to ${shownLog.url}, newest first`}
            attribute="endpoint-delivery"
            types={shownLog.events}
            canManage={props.canManage}
            version={props.version}
          />
        </>
      )}
    </Section>
  );
}
