import type { Transaction } from 'kysely';
import type { EngineEvent } from '../domain/messages.ts';
import type { Database } from '../store/schema.ts';
import { InstanceListeners } from './instance-listeners.ts';
import type { EventProjection } from './recorder.ts';

/**
 * What changed on an instance, as the dashboard's live view needs it: `status` after a connection event (login,
 * logout, close, a pairing attempt started or ended) or a session status event (pacing paused or resumed sends),
 * `deliveries` after an event entered the webhook log or a delivery attempt finished.
 */
export type LiveChange = 'status' | 'deliveries';

/** A subscriber to one instance's changes. Must not throw. */
export type LiveListener = (change: LiveChange) => void;

/** Events that change neither the status view nor the webhook log (no webhook event is made of them). */
const QUIET: ReadonlySet<EngineEvent['type']> = new Set([
  'read',
  'contacts',
  'lid-mapping',
  'label',
  'chat-label',
]);

/**
 * In-process fan-out of committed instance changes to live views (the dashboard's server-sent events). It is a
 * projection of the {@link EventRecorder} that writes nothing and speaks only after the commit, so a listener that
 * reads the store sees the change; the webhook worker reports finished attempts through {@link attempted}.
 * Changes recorded by another node are not seen here (each node feeds its own browsers).
 */
export class LiveFeed implements EventProjection {
  readonly name = 'live-feed';
  readonly #listeners = new InstanceListeners<[LiveChange]>();

  /** Nothing to write: the feed speaks after the commit. */
  async apply(_trx: Transaction<Database>, _instanceId: string, _event: EngineEvent): Promise<void> {}

  /** Tells the instance's listeners what kind of change committed. */
  afterCommit(instanceId: string, event: EngineEvent): void {
    if (event.type === 'connection') this.#publish(instanceId, 'status');
    else if (!QUIET.has(event.type)) {
      // Pacing's pause and resume change what the status view shows; the other session statuses come with the
      // connection event they were derived from, which already said so.
      if (event.type === 'sessionStatus' && (event.status === 'paused' || event.status === 'resumed'))
        this.#publish(instanceId, 'status');
      this.#publish(instanceId, 'deliveries');
    }
  }

  /** A delivery attempt of the instance finished (called by the webhook worker's attempt hook). */
  attempted(instanceId: string): void {
    this.#publish(instanceId, 'deliveries');
  }

  /** Calls `listener` on every change of `instanceId` until the returned function is called. */
  subscribe(instanceId: string, listener: LiveListener): () => void {
    return this.#listeners.subscribe(instanceId, listener);
  }

  #publish(instanceId: string, change: LiveChange): void {
    this.#listeners.notify(instanceId, change);
  }
}
