import type { Transaction } from 'kysely';
import type { EngineEvent } from '../domain/messages.ts';
import type { StoreSignals, TurnSignals } from '../store/pg-signals.ts';
import type { Database } from '../store/schema.ts';
import { InstanceListeners } from './instance-listeners.ts';
import type { EventProjection } from './recorder.ts';

/** A subscriber to one instance's commits. Must not throw. */
export type CommitListener = () => void;

/**
 * Signal that events of an instance were committed: the wake-up of the event streams
 * (docs/decisions/0031-event-stream.md). A projection of the {@link EventRecorder} that writes nothing and speaks
 * only after the commit, so a listener that then reads the event log sees the new events. It carries no event:
 * a stream reads the store from where it stands, so a wake-up that comes twice, late or for an event that wrote no
 * log row costs one read and never a gap or a duplicate.
 *
 * With {@link StoreSignals} (PostgreSQL, docs/decisions/0078-store-signals.md) it also tells the other nodes which
 * instances committed, once per turn of the event loop, and wakes this node's listeners for the instances the
 * other nodes name, and all of them after a gap in the signals. Without them, commits made by another node are not
 * seen here: streams also read the store on a timer for those, and keep that timer in any case (a signal is best
 * effort).
 */
export class EventCommits implements EventProjection {
  readonly name = 'event-commits';
  readonly #listeners = new InstanceListeners<[]>();
  /** Instances committed in this turn, told to the other nodes at its end (with signals). */
  #committed: TurnSignals | undefined;

  /** Nothing to write: the signal speaks after the commit. */
  async apply(_trx: Transaction<Database>, _instanceId: string, _event: EngineEvent): Promise<void> {}

  /** Wakes the instance's listeners, and notes the instance for the other nodes (with signals). */
  afterCommit(instanceId: string, _event: EngineEvent): void {
    this.#listeners.notify(instanceId);
    this.#committed?.note(instanceId);
  }

  /**
   * Exchanges commits with the other nodes through `signals` from now on (docs/decisions/0078-store-signals.md).
   * @returns a function that stops the exchange.
   */
  connect(signals: StoreSignals): () => void {
    const { outgoing: committed, stop } = this.#listeners.relay(signals, 'events');
    this.#committed = committed;
    return () => {
      stop();
      if (this.#committed === committed) this.#committed = undefined;
    };
  }

  /** Calls `listener` after every commit of `instanceId`'s events until the returned function is called. */
  subscribe(instanceId: string, listener: CommitListener): () => void {
    return this.#listeners.subscribe(instanceId, listener);
  }

  /** How many listeners are subscribed, over every instance (tests check that closed streams unsubscribe). */
  get listeners(): number {
    return this.#listeners.count;
  }
}
