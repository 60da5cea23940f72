import type { Transaction } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import type { ChatLabelChange } from '../domain/labels.ts';
import { lidOfJid } from '../domain/lids.ts';
import { type EngineEvent, userJid } from '../domain/messages.ts';
import { extended } from '../domain/objects.ts';
import { applyChatLabel, applyLabelEdit, clearLabels } from '../store/labels.ts';
import { findLidMappingByLid } from '../store/lid-mappings.ts';
import type { Database } from '../store/schema.ts';
import type { EventProjection } from './recorder.ts';

/**
 * Labels as a projection of engine events (docs/decisions/0045-business-labels.md,
 * docs/decisions/0024-engines-and-data-flow.md): a `label` event is written to `labels`, a `chat-label` event to
 * `chat_labels`, in the recorder's transaction, stamped with the clock's epoch ms. A `connection` event not logged
 * in (a logout: the instance row loses its phone the same way, instance-state.ts) clears both, as labels belong to
 * the account and the next one linked may be another; a new link brings the account's labels again (the live
 * engine's first app state sync is a full one; the sandbox replays its account's labels at login). A chat label
 * naming a `<lid>@lid` chat whose pair parley keeps is written under the pair's phone JID, where the chat routes
 * look for it (src/app/chats.ts `storedChatOf`, docs/decisions/0038-lid-mappings.md). Every other event is ignored.
 */
export class LabelProjection implements EventProjection {
  readonly name = 'labels';
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  async apply(trx: Transaction<Database>, instanceId: string, event: EngineEvent): Promise<void> {
    if (event.type === 'label') await applyLabelEdit(trx, instanceId, event.label, this.#clock());
    else if (event.type === 'chat-label')
      await applyChatLabel(trx, instanceId, await resolved(trx, instanceId, event.change), this.#clock());
    else if (event.type === 'connection' && !event.state.loggedIn) await clearLabels(trx, instanceId);
  }
}

/** `change` with a `<lid>@lid` chat named by the phone JID of its stored pair; as it is otherwise. */
async function resolved(
  trx: Transaction<Database>,
  instanceId: string,
  change: ChatLabelChange,
): Promise<ChatLabelChange> {
  const lid = lidOfJid(change.chat);
  if (lid === null) return change;
  const pair = await findLidMappingByLid(trx, instanceId, lid);
  return pair === undefined ? change : extended(change, { chat: userJid(pair.phone) });
}
