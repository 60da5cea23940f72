import type { Transaction } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import type { EngineEvent } from '../domain/messages.ts';
import { moveLidChatLabels } from '../store/labels.ts';
import { upsertLidMappings } from '../store/lid-mappings.ts';
import type { Database } from '../store/schema.ts';
import type { EventProjection } from './recorder.ts';

/**
 * The phone↔LID pairs as a projection of engine events (docs/decisions/0038-lid-mappings.md,
 * docs/decisions/0024-engines-and-data-flow.md): a `lid-mapping` event's pairs are written to `lid_mappings` in the
 * recorder's transaction, stamped with the clock's epoch ms, and the chat labels kept under a LID chat of those pairs
 * move to its phone JID in the same transaction (src/store/labels.ts `moveLidChatLabels`), where the chat routes look
 * for them once the pair is known (src/app/chats.ts `storedChatOf`). The chat's messages move in the same
 * transaction too, in the message projection (src/events/message-projection.ts), which holds the rows not yet
 * written. Every other event is ignored.
 */
export class LidMappingProjection implements EventProjection {
  readonly name = 'lid-mappings';
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  async apply(trx: Transaction<Database>, instanceId: string, event: EngineEvent): Promise<void> {
    if (event.type !== 'lid-mapping') return;
    await upsertLidMappings(trx, instanceId, event.mappings, this.#clock());
    await moveLidChatLabels(trx, instanceId, event.mappings);
  }
}
