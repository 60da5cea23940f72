import { DomainError, errors } from '../domain/errors.ts';
import type { EventType, Instance } from '../domain/instance.ts';
import type { NormalisedEvent } from '../events/normalise.ts';
import type { Store } from '../store/database.ts';
import { getInstance } from '../store/instances.ts';
import { getWebhookState, readEventLog } from '../store/webhook-events.ts';

/**
 * One event of the event log (docs/decisions/0030-event-log.md): exactly the webhook body of the event
 * (docs/decisions/0018-webhook-events-and-payloads.md: `type`, `state` on receipts, `event`, `instanceId`,
 * `sequence`, parsed from the stored body text), plus `createdAt`, when parley recorded it (RFC 3339 UTC).
 */
export type LoggedEvent = NormalisedEvent & { instanceId: string; sequence: number; createdAt: string };

/**
 * One page of the event log: events in sequence order, and `next`, the `after` of the next request. `next` is the
 * last event's sequence when the page is full (`limit` events: more may follow at once); otherwise the log was read
 * to its end, and `next` is the instance's last sequence at the time of the read (events of other types, or pruned
 * ones, are skipped for good), never less than the `after` asked for. It is never null, so a poller always passes
 * `next` back as `after`.
 */
export interface EventLogPage {
  events: LoggedEvent[];
  next: number;
}

/**
 * A request for a page of the event log; `after` ≥ 0, `limit` ≥ 1, `types` empty or omitted: every type. `field`
 * names where `after` came from in the 409 of a position past the log's end ({@link cursorAheadError}); default
 * `after`.
 */
export interface EventLogRequest {
  after: number;
  limit: number;
  types?: readonly EventType[];
  field?: string;
}

/**
 * The event log (docs/decisions/0030-event-log.md): every event recorded for an instance, webhook or not, readable
 * in `sequence` order from any point still kept, so a consumer that was down catches up in pages instead of one
 * redelivery at a time.
 */
export class EventLogService {
  readonly #store: Store;

  constructor(deps: { store: Store }) {
    this.#store = deps.store;
  }

  /**
   * The events of `instance` after sequence `request.after`, oldest first, at most `request.limit` of them, of the
   * given types only when `request.types` names some.
   * @throws DomainError not_found `instance not found` when `request.after` is past the instance's last sequence
   *   because the instance is gone (deleted while a stream or a poller read it: its `webhook_state` row went with it,
   *   so its last sequence reads 0); conflict when `request.after` is past the last sequence of an instance that is
   *   still there ({@link cursorAheadError}, docs/decisions/0073-event-log-positions-past-the-head.md); store errors
   *   as `store_unavailable`.
   */
  async page(instance: Instance, request: EventLogRequest): Promise<EventLogPage> {
    const { after, limit, types } = request;
    const read = await readEventLog(this.#store.db, instance.id, {
      after,
      limit,
      ...(types === undefined ? {} : { types }),
    });
    if (after > read.head) {
      // Only on this path, never on an ordinary read: one lookup of the row the delete removed.
      if ((await getInstance(this.#store.db, instance.id)) === undefined) throw errors.instanceNotFound();
      throw cursorAheadError(request.field ?? 'after', after, read.head);
    }
    const events = read.rows.map(
      (row): LoggedEvent => ({
        // The stored text is the body webhookBody (src/events/normalise.ts) wrote for this event.
        ...(JSON.parse(row.payload) as NormalisedEvent & { instanceId: string; sequence: number }),
        createdAt: row.createdAt,
      }),
    );
    const last = events.at(-1);
    const next = events.length === limit && last ? last.sequence : read.head;
    return { events, next };
  }

  /**
   * Checks that a stream may start after `after`: the instance's last sequence is at least `after`. `field` names
   * where the position came from (`after` or `Last-Event-ID`) in the error.
   * @throws DomainError conflict ({@link cursorAheadError}); store errors as `store_unavailable`.
   */
  async checkPosition(instance: Instance, after: number, field: string): Promise<void> {
    if (after === 0) return;
    const { lastSequence } = await getWebhookState(this.#store.db, instance.id);
    if (after > lastSequence) throw cursorAheadError(field, after, lastSequence);
  }
}

/**
 * The 409 of a position past the instance's last sequence (docs/decisions/0073-event-log-positions-past-the-head.md):
 * no `next` parley handed out can be there (sequences are handed out in order and never taken back), so the position
 * comes from elsewhere (another instance, a store restored from an older backup) and reading on from it would skip
 * every event up to it without a word.
 */
export function cursorAheadError(field: string, after: number, head: number): DomainError {
  return new DomainError(
    'conflict',
    `${field} ${after} is past the instance's last event (sequence ${head}): resume from ${head} or less, or from 0 for the oldest event kept`,
  );
}
