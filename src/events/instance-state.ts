import type { Kysely, Transaction } from 'kysely';
import type { Clock } from '../domain/clock.ts';
import type { EngineEvent } from '../domain/messages.ts';
import { phoneOfJid } from '../domain/messages.ts';
import { tellInstancesWritten } from '../store/instance-writes.ts';
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
  readonly #db: Kysely<Database>;

  /**
   * @param db the store the recorder writes (its root handle): its row writes are told after their commit to what
   *   keeps instance lists (src/store/instance-writes.ts, docs/decisions/0088-kept-instance-lists.md).
   */
  constructor(clock: Clock, db: Kysely<Database>) {
    this.#clock = clock;
    this.#db = db;
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
      // Only a row still linked is written: an unchanged row would signal every node that its list changed.
      await trx
        .updateTable('instances')
        .set({ jid: null, phone: null, push_name: null })
        .where('id', '=', instanceId)
        .where((eb) =>
          eb.or([eb('jid', 'is not', null), eb('phone', 'is not', null), eb('push_name', 'is not', null)]),
        )
        .execute();
    }
  }

  afterCommit(_instanceId: string, event: EngineEvent): void {
    if (event.type === 'connection') tellInstancesWritten(this.#db);
  }
}
