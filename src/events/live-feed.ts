import type { Transaction } from 'kysely';
import type { EngineEvent } from '../domain/messages.ts';
import type { StoreSignals, TurnSignals } from '../store/pg-signals.ts';
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
 * Changes recorded by another node are not seen here (each node feeds its own browsers), but for the delivery
 * attempts another node's webhook worker finishes, which the store's signals bring ({@link connect}).
 */
export class LiveFeed implements EventProjection {
  readonly name = 'live-feed';
  readonly #listeners = new InstanceListeners<[LiveChange]>();
  /** Attempts of instances held elsewhere finished in this turn, told to the other nodes at its end. */
  #attempted: TurnSignals | undefined;
  #elsewhere: ((instanceId: string) => boolean) | undefined;

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

  /**
   * A delivery attempt of the instance finished (called by the webhook worker's attempt hook). With signals, an
   * instance whose session another node holds (where its live views are served) is told to the other nodes.
   */
  attempted(instanceId: string): void {
    this.#publish(instanceId, 'deliveries');
    if (this.#elsewhere?.(instanceId)) this.#attempted?.note(instanceId);
  }

  /**
   * Exchanges delivery-log changes with the other nodes through `signals` from now on
   * (docs/decisions/0078-store-signals.md): attempts this node finished for an instance `heldElsewhere` says another
   * node holds are told to the other nodes once per turn, and those the other nodes tell wake this node's listeners
   * (`deliveries`), as does a gap in the signals. Events need no exchange: the node holding a session records them.
   * @returns a function that stops the exchange.
   */
  connect(signals: StoreSignals, heldElsewhere: (instanceId: string) => boolean): () => void {
    const { outgoing: attempted, stop } = this.#listeners.relay(signals, 'deliveries', 'deliveries');
    this.#attempted = attempted;
    this.#elsewhere = heldElsewhere;
    return () => {
      stop();
      if (this.#attempted === attempted) {
        this.#attempted = undefined;
        this.#elsewhere = undefined;
      }
    };
  }

  /** Calls `listener` on every change of `instanceId` until the returned function is called. */
  subscribe(instanceId: string, listener: LiveListener): () => void {
    return this.#listeners.subscribe(instanceId, listener);
  }

  #publish(instanceId: string, change: LiveChange): void {
    this.#listeners.notify(instanceId, change);
  }
}
