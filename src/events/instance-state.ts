import type { Transaction } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import type { EngineEvent } from '../domain/messages.ts';
import { phoneOfJid } from '../domain/messages.ts';
import type { Database } from '../store/schema.ts';
import type { EventProjection } from './recorder.ts';

/**
 * Mirrors connection events into the instance row: the linked phone and JID while logged in (cleared on
 * logout), and `last_connected_at` each time the session opens logged in (docs/decisions/0002-instance-resolution.md:
 * the default instance is the one that connected most recently).
 */
export class InstanceStateProjection implements EventProjection {
  readonly name = 'instance-state';
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  async apply(trx: Transaction<Database>, instanceId: string, event: EngineEvent): Promise<void> {
    if (event.type !== 'connection') return;
    const { state } = event;
    if (state.loggedIn && state.jid !== null) {
      await trx
        .updateTable('instances')
        .set({
          jid: state.jid,
          phone: state.phone ?? phoneOfJid(state.jid),
          push_name: state.pushName,
          ...(state.connected ? { last_connected_at: Math.trunc(this.#clock()) } : {}),
        })
        .where('id', '=', instanceId)
        .execute();
    } else if (!state.loggedIn) {
      await trx
        .updateTable('instances')
        .set({ jid: null, phone: null, push_name: null })
        .where('id', '=', instanceId)
        .execute();
    }
  }
}
