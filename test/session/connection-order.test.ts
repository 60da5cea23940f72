/**
 * A session's events are recorded in the order its engine emits them (docs/decisions/0024-engines-and-data-flow.md,
 * the recorder's emission order): a connection state and the `SessionStatus` it means, recorded as one item since
 * docs/decisions/0076-status-with-its-write.md, must not be overtaken by an event the engine emitted after it
 * (Baileys emits a connection state in the background, `#background(this.#onOpen())`, while its platform events go on).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EngineSessionContext } from '../../src/engines/engine.ts';
import { createTestApp } from '../support/app.ts';
import { FakeEngine } from '../support/fake-engine.ts';
import { testDialects } from '../support/store.ts';

const JID = '5511999990999:3@s.whatsapp.net';
const PEER = '5511988887777@s.whatsapp.net';

for (const dialect of testDialects()) {
  describe(`a connection state keeps its place among the session's events [${dialect}]`, () => {
    it('records the SessionStatus of a connection before a presence emitted after it', async () => {
      const fake = new FakeEngine();
      let context: EngineSessionContext | undefined;
      const engine = Object.assign(Object.create(fake) as FakeEngine, {
        createSession(ctx: EngineSessionContext) {
          context = ctx;
          return fake.createSession(ctx);
        },
      });
      const t = await createTestApp({ dialect, liveEngine: engine });
      try {
        const live = await t.newInstance('live');
        await t.services.sessions.session(live);
        assert.ok(context);
        const ctx = context;
        const connection = (connected: boolean) => ({
          type: 'connection' as const,
          state: { connected, loggedIn: true, jid: JID, phone: '5511999990999', pushName: 'Fake' },
        });
        const presence = () => ({
          type: 'presence' as const,
          source: { chat: PEER, sender: PEER, isFromMe: false, isGroup: false },
          state: 'composing' as const,
          media: '' as const,
        });
        // The engine's order: connected, someone types, disconnected, someone types again.
        await Promise.all([
          ctx.emit(connection(true)),
          ctx.emit(presence()),
          ctx.emit(connection(false)),
          ctx.emit(presence()),
        ]);
        const rows = await t.services.store.db
          .selectFrom('webhook_events')
          .select(['type', 'payload'])
          .where('instance_id', '=', live.id)
          .where('type', 'in', ['SessionStatus', 'ChatPresence'])
          .orderBy('sequence')
          .execute();
        const order = rows.map((row) =>
          row.type === 'SessionStatus' ? `SessionStatus ${JSON.parse(row.payload).event.status}` : row.type,
        );
        assert.deepEqual(order, [
          'SessionStatus connected',
          'ChatPresence',
          'SessionStatus disconnected',
          'ChatPresence',
        ]);
      } finally {
        await t.close();
      }
    });
  });
}
