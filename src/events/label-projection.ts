import type { Transaction } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import type { EngineEvent } from '../domain/messages.ts';
import { applyChatLabel, applyLabelEdit, clearLabels } from '../store/labels.ts';
import type { Database } from '../store/schema.ts';
import type { EventProjection } from './recorder.ts';

/**
 * Labels as a projection of engine events (docs/decisions/0045-business-labels.md,
 * docs/decisions/0024-engines-and-data-flow.md): a `label` event is written to `labels`, a `chat-label` event to
 * `chat_labels`, in the recorder's transaction, stamped with the clock's epoch ms. A `connection` event not logged
 * in (a logout: the instance row loses its phone the same way, instance-state.ts) clears both, as labels belong to
 * the account and the next one linked may be another; a new link brings the account's labels again (the live
 * engine's first app state sync is a full one; the sandbox replays its account's labels at login). Every other
 * event is ignored.
 */
export class LabelProjection implements EventProjection {
  readonly name = 'labels';
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  async apply(trx: Transaction<Database>, instanceId: string, event: EngineEvent): Promise<void> {
    if (event.type === 'label') await applyLabelEdit(trx, instanceId, event.label, this.#clock());
    else if (event.type === 'chat-label') await applyChatLabel(trx, instanceId, event.change, this.#clock());
    else if (event.type === 'connection' && !event.state.loggedIn) await clearLabels(trx, instanceId);
  }
}
