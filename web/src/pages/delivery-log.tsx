import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { Badge, messageOf, Notice, ScrollBox, Time, type Tone, useAction, useLatestRead } from '../ui.tsx';

/** One attempt of a delivery, as the delivery log answers it (docs/api.md, `GET /v1/webhook/deliveries`). */
export interface Attempt {
  number: number;
  at: string;
  /** Null while the attempt is in flight. */
  finishedAt?: string | null;
  /** Null when no HTTP answer came (a refused connection, a timeout) and for a broker endpoint. */
  statusCode: number | null;
  durationMs: number | null;
  error: string | null;
  /** The start of the receiver's answer, or a broker's receipt. */
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

/** The statuses a delivery log filters by (docs/api.md, `GET /v1/webhook/deliveries`). */
const STATUSES = ['pending', 'delivered', 'failed', 'unsent'] as const;

/** Entries per page. */
const PAGE_SIZE = 20;

/**
 * The outcome of a delivery in words: `Delivered`, `Delivered on attempt 3`, `Queued`, `Sending…`, `Retrying:
 * attempt 2 failed`, `Failed after 7 attempts`, `Not sent: no webhook URL configured`.
 */
export function outcomeText(delivery: Delivery): string {
  const made = delivery.attempts.length;
  const last = delivery.attempts[made - 1];
  switch (delivery.status) {
    case 'delivered':
      return made > 1 ? `Delivered on attempt ${made}` : 'Delivered';
    case 'failed':
      return `Failed after ${made} attempt${made === 1 ? '' : 's'}`;
    case 'unsent':
      return `Not sent: ${delivery.reason ?? 'not queued'}`;
    default:
      if (last === undefined) return 'Queued';
      if (last.durationMs === null) return 'Sending…';
      return `Retrying: attempt ${last.number} failed`;
  }
}

/**
 * One attempt in words: `HTTP 200 · 34 ms`, `HTTP 500 · 12 ms`, `No answer: connection refused · 22 ms`,
 * `Accepted: confirmed by RabbitMQ (exchange parley) · 8 ms`, `In flight`.
 */
export function attemptText(attempt: Attempt): string {
  if (attempt.durationMs === null) return 'In flight';
  const took = ` · ${attempt.durationMs} ms`;
  if (attempt.statusCode !== null) return `HTTP ${attempt.statusCode}${took}`;
  if (attempt.error !== null) return `No answer: ${attempt.error}${took}`;
  return `Accepted${attempt.responseBody ? `: ${attempt.responseBody}` : ''}${took}`;
}

/**
 * The badge tone of a delivery's status: delivered `ok`, failed `bad`, retrying after a failed attempt `warn`,
 * queued or sending `info`, not sent `off` (docs/decisions/0047-dashboard-style-library.md).
 */
export function toneOf(delivery: Delivery): Tone {
  switch (delivery.status) {
    case 'delivered':
      return 'ok';
    case 'failed':
      return 'bad';
    case 'unsent':
      return 'off';
    default:
      return delivery.attempts.some((a) => a.durationMs !== null) ? 'warn' : 'info';
  }
}

/**
 * A delivery log with its controls: filters by status and event type, pages of 20 (newest first, **Older** and
 * **Newer**), every attempt in words, and for a member a **Redeliver** button per event plus a bulk redelivery of
 * the ticked events. `path` is the log's dashboard API path (`/instances/<id>/deliveries`, an endpoint's
 * `/instances/<id>/endpoints/<endpointId>/deliveries`); redelivery posts to `<path>/<eventId>/redeliver`. The page
 * shown is read again whenever `version` changes (the server pushed a delivery change); another `path` is read from
 * its first page, with no filter and nothing ticked. Rows carry `data-<attribute>` = the event id.
 */
export function DeliveryLog(props: {
  path: string;
  caption: string;
  attribute: 'delivery' | 'endpoint-delivery';
  /** Event types offered by the type filter. */
  types: readonly string[];
  canManage: boolean;
  version: number;
}) {
  const [deliveries, setDeliveries] = useState<Delivery[]>([]);
  const [status, setStatus] = useState('');
  const [type, setType] = useState('');
  /** Cursors of the pages before the one shown (the first page has none). */
  const [cursors, setCursors] = useState<string[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [selected, setSelected] = useState<string[]>([]);
  const [loadError, setLoadError] = useState<string | null>(null);
  const action = useAction();
  const cursor = cursors[cursors.length - 1];
  // Reads overlap (a pushed change while the reader picks a filter or a page): only the latest started one is shown,
  // so the rows, and what "Redeliver selected" acts on, always match the filters shown.
  const beginRead = useLatestRead();
  const load = () => {
    const latest = beginRead();
    const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (status) query.set('status', status);
    if (type) query.set('types', type);
    if (cursor) query.set('cursor', cursor);
    return api<{ deliveries: Delivery[]; nextCursor: string | null }>('GET', `${props.path}?${query}`)
      .then((page) => {
        if (!latest()) return;
        setDeliveries(page.deliveries);
        setNext(page.nextCursor);
        setSelected((ids) => ids.filter((id) => page.deliveries.some((d) => d.id === id)));
        setLoadError(null);
      })
      .catch((e) => {
        if (latest()) setLoadError(messageOf(e));
      });
  };
  // A redelivery reads the log again when it ends: with the filters shown then, not those of the click.
  const current = useRef(load);
  current.current = load;
  const reload = () => current.current();
  const shownPath = useRef(props.path);
  useEffect(() => {
    if (shownPath.current !== props.path) {
      // Another log (another instance's, another endpoint's): nothing of the previous one stays, its reads on their
      // way are not shown, and it is read from its first page, unfiltered (a cursor is one log's own).
      shownPath.current = props.path;
      beginRead();
      setDeliveries([]);
      setNext(null);
      setSelected([]);
      setLoadError(null);
      if (status !== '' || type !== '' || cursors.length > 0) {
        // This effect runs again once they are cleared, and reads then.
        setStatus('');
        setType('');
        setCursors([]);
        return;
      }
    }
    void load();
  }, [props.path, props.version, status, type, cursor]);
  const filter = (set: (value: string) => void) => (value: string) => {
    set(value);
    setCursors([]);
    setSelected([]);
  };
  const redeliver = (id: string) => api('POST', `${props.path}/${id}/redeliver`);
  const redeliverOne = (delivery: Delivery) =>
    action.run(() => redeliver(delivery.id).then(reload), `Event ${delivery.sequence} queued for redelivery`);
  const redeliverSelected = () =>
    action.run(
      async () => {
        const failures: string[] = [];
        for (const id of selected) {
          const sequence = deliveries.find((d) => d.id === id)?.sequence ?? id;
          await redeliver(id).catch((e) => failures.push(`event ${sequence}: ${messageOf(e)}`));
        }
        const queued = selected.length - failures.length;
        setSelected([]);
        await reload();
        if (failures.length > 0) throw new Error(`${queued} queued; not queued: ${failures.join('; ')}`);
        return queued;
      },
      (queued) => `${queued} event${queued === 1 ? '' : 's'} queued for redelivery`,
    );
  const allTicked = deliveries.length > 0 && deliveries.every((d) => selected.includes(d.id));
  const id = props.attribute;
  return (
    <>
      <div class="row filters">
        <div>
          <label for={`${id}-${props.path}-status`}>Status</label>
          <select
            id={`${id}-${props.path}-status`}
            value={status}
            onChange={(e) => filter(setStatus)(e.currentTarget.value)}
          >
            <option value="">any</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label for={`${id}-${props.path}-type`}>Event type</label>
          <select
            id={`${id}-${props.path}-type`}
            value={type}
            onChange={(e) => filter(setType)(e.currentTarget.value)}
          >
            <option value="">any</option>
            {props.types.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </div>
        {props.canManage && (
          <button type="button" disabled={action.busy || selected.length === 0} onClick={redeliverSelected}>
            Redeliver selected ({selected.length})
          </button>
        )}
      </div>
      <Notice error={loadError ?? action.error} ok={action.ok} />
      <ScrollBox label={props.caption}>
        <table>
          <caption class="visually-hidden">{props.caption}</caption>
          <thead>
            <tr>
              {props.canManage && (
                <th scope="col">
                  <input
                    type="checkbox"
                    aria-label="Select every event on this page"
                    checked={allTicked}
                    onChange={(e) => setSelected(e.currentTarget.checked ? deliveries.map((d) => d.id) : [])}
                  />
                </th>
              )}
              <th scope="col">#</th>
              <th scope="col">Event</th>
              <th scope="col">Outcome</th>
              <th scope="col">Attempts</th>
              <th scope="col">Created</th>
              {props.canManage && <th scope="col">Action</th>}
            </tr>
          </thead>
          <tbody>
            {deliveries.map((d) => (
              <tr key={d.id} {...{ [`data-${props.attribute}`]: d.id }}>
                {props.canManage && (
                  <td>
                    <input
                      type="checkbox"
                      aria-label={`Select event ${d.sequence}`}
                      checked={selected.includes(d.id)}
                      onChange={(e) =>
                        setSelected(
                          e.currentTarget.checked ? [...selected, d.id] : selected.filter((x) => x !== d.id),
                        )
                      }
                    />
                  </td>
                )}
                <td>{d.sequence}</td>
                <td>{d.type}</td>
                <td>
                  <Badge tone={toneOf(d)}>{outcomeText(d)}</Badge>
                </td>
                <td>
                  {d.attempts.length === 0
                    ? 'none'
                    : d.attempts.map((a) => (
                        <details key={a.number}>
                          <summary>
                            Attempt {a.number}: {attemptText(a)}
                          </summary>
                          <p>
                            <Time value={a.at} />
                          </p>
                          {a.error && a.statusCode !== null && <p>Error: {a.error}</p>}
                          {a.responseBody && <pre>{a.responseBody}</pre>}
                        </details>
                      ))}
                </td>
                <td>
                  <Time value={d.createdAt} />
                </td>
                {props.canManage && (
                  <td>
                    <button
                      type="button"
                      disabled={action.busy}
                      onClick={() => redeliverOne(d)}
                      aria-label={`Redeliver event ${d.sequence}`}
                    >
                      Redeliver
                    </button>
                  </td>
                )}
              </tr>
            ))}
            {deliveries.length === 0 && (
              <tr>
                <td colSpan={7}>{status || type || cursor ? 'No events match.' : 'No events yet.'}</td>
              </tr>
            )}
          </tbody>
        </table>
      </ScrollBox>
      <div class="row pager">
        <button
          type="button"
          disabled={cursors.length === 0}
          onClick={() => setCursors(cursors.slice(0, -1))}
        >
          Newer
        </button>
        <span>Page {cursors.length + 1}</span>
        <button type="button" disabled={next === null} onClick={() => next && setCursors([...cursors, next])}>
          Older
        </button>
      </div>
    </>
  );
}
