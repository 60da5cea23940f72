import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { messageOf, Notice, ScrollBox, Section, Time, useLatestRead } from '../ui.tsx';

/** One entry of the event log: the webhook body of the event plus when it was recorded. */
interface LoggedEvent {
  type: string;
  state?: string;
  event: unknown;
  instanceId: string;
  sequence: number;
  createdAt: string;
}

/** One page of the event log (`GET /v1/events`'s answer). */
interface EventsPage {
  events: LoggedEvent[];
  next: number;
}

/** Events a page of the panel shows. */
const PAGE_SIZE = 25;

/**
 * The event log of an instance (docs/decisions/0030-event-log.md): every recorded event in sequence order, webhook or
 * not, filtered by type and read from a sequence, a page at a time (the page's `next` reads on). Reloaded when the
 * server says an event was recorded (`version` counts those pushes) while the first page is shown; for another
 * instance (`id`), read from its first page with no filter.
 */
export function EventLogPanel(props: { id: string; version: number }) {
  const base = `/instances/${props.id}`;
  const [eventTypes, setEventTypes] = useState<string[]>([]);
  const [types, setTypes] = useState<string[]>([]);
  const [from, setFrom] = useState(0);
  const [after, setAfter] = useState(0);
  const [page, setPage] = useState<EventsPage | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [configError, setConfigError] = useState<string | null>(null);

  // Reads overlap (a reload pushed by a new event while the reader applies a filter or turns a page): only the latest
  // started one is shown, so the entries always match the filter applied.
  const beginRead = useLatestRead();
  const load = (start: number, selected: string[]) => {
    const latest = beginRead();
    const query = new URLSearchParams({ after: String(start), limit: String(PAGE_SIZE) });
    if (selected.length > 0) query.set('types', selected.join(','));
    return api<EventsPage>('GET', `${base}/event-log?${query}`)
      .then((value) => {
        if (!latest()) return;
        setAfter(start);
        setPage(value);
        setError(null);
      })
      .catch((e) => {
        if (latest()) setError(messageOf(e));
      });
  };

  // The event types offered come from the instance's webhook settings, read again for another instance: the previous
  // instance's read, answering or failing later, is not shown.
  const beginConfigRead = useLatestRead();
  useEffect(() => {
    const latest = beginConfigRead();
    setConfigError(null);
    api<{ eventTypes?: string[] }>('GET', `${base}/webhook`)
      .then((config) => {
        if (latest()) setEventTypes(config.eventTypes ?? []);
      })
      .catch((e) => {
        if (latest()) setConfigError(messageOf(e));
      });
  }, [base]);
  const shownBase = useRef(base);
  useEffect(() => {
    if (shownBase.current !== base) {
      // Another instance: its log is read from its first page, unfiltered; nothing of the previous one stays.
      shownBase.current = base;
      setTypes([]);
      setFrom(0);
      setAfter(0);
      setPage(null);
      setError(null);
      void load(0, []);
      return;
    }
    // New events show by themselves on the page that starts where the reader chose; later pages stay as read.
    if (after === from) void load(from, types);
  }, [base, props.version]);

  const apply = (event: Event) => {
    event.preventDefault();
    void load(from, types);
  };
  const events = page?.events ?? [];
  return (
    <Section title="Event log">
      <form onSubmit={apply} aria-label="Event log filters">
        <fieldset>
          <legend>Event types (none ticked: every type)</legend>
          {eventTypes.map((type) => (
            <label key={type} class="check">
              <input
                type="checkbox"
                checked={types.includes(type)}
                onChange={(e) =>
                  setTypes(e.currentTarget.checked ? [...types, type] : types.filter((t) => t !== type))
                }
              />
              {type}
            </label>
          ))}
        </fieldset>
        <div class="row">
          <div>
            <label for="event-log-after">After sequence</label>
            <input
              id="event-log-after"
              type="number"
              min={0}
              value={from}
              onInput={(e) => setFrom(Math.max(0, Number(e.currentTarget.value) || 0))}
            />
          </div>
          <button type="submit">Show</button>
        </div>
      </form>
      <Notice error={error ?? configError} />
      <ScrollBox label="Event log, table">
        <table>
          <caption class="visually-hidden">Recorded events, oldest first</caption>
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Type</th>
              <th scope="col">Recorded</th>
              <th scope="col">Body</th>
            </tr>
          </thead>
          <tbody>
            {events.map((entry) => (
              <tr key={entry.sequence} data-event={entry.sequence}>
                <td>{entry.sequence}</td>
                <td>
                  {entry.type}
                  {entry.state ? ` (${entry.state})` : ''}
                </td>
                <td>
                  <Time value={entry.createdAt} />
                </td>
                <td>
                  <details>
                    <summary>JSON</summary>
                    <pre>{JSON.stringify(entry, null, 2)}</pre>
                  </details>
                </td>
              </tr>
            ))}
            {events.length === 0 && (
              <tr>
                <td colSpan={4}>No events after sequence {after}.</td>
              </tr>
            )}
          </tbody>
        </table>
      </ScrollBox>
      <div class="row">
        <button type="button" disabled={after === 0} onClick={() => load(0, types)}>
          First page
        </button>
        <button
          type="button"
          disabled={events.length < PAGE_SIZE}
          onClick={() => page && load(page.next, types)}
        >
          Next page
        </button>
      </div>
    </Section>
  );
}
