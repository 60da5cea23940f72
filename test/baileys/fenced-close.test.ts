import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { WAMessage } from 'baileys';
import { BaileysEngine } from '../../src/engines/baileys/index.ts';
import { SqlSessionLocks } from '../../src/sessions/instance-lock.ts';
import { testDialects } from '../support/store.ts';
import { fakeFactory, storePairedCreds } from './fake-socket.ts';
import {
  type LiveFixture,
  liveFixture,
  recordingContext,
  silentLogger,
  until,
  untilAsync,
} from './support.ts';

/**
 * A fenced close of a live session with platform events still queued to be recorded
 * (docs/decisions/0008-leases-and-fencing.md, docs/decisions/0011-store-faults.md): the socket ends and the lock is
 * given up at once, so another node may open its own; the close resolves only once the events the socket received
 * are recorded. Those events were acknowledged to the platform, which never hands them over again, so dropping them
 * would lose them; recordings are not fenced (a late one overwrites nothing). The lease keeper does not wait for
 * that close in its rounds (test/nodes/lease-round.test.ts).
 */

const PEER = '5511988887777@s.whatsapp.net';

const incoming = (id: string): WAMessage => ({
  key: { remoteJid: PEER, fromMe: false, id },
  message: { conversation: `m ${id}` },
  messageTimestamp: 1_700_000_000,
  pushName: 'Ana',
});

for (const dialect of testDialects()) {
  describe(`a fenced close with received events still queued (${dialect})`, () => {
    let fixture: LiveFixture;
    before(async () => {
      fixture = await liveFixture(dialect, 1);
    });
    after(async () => {
      await fixture.test.cleanup();
    });

    it('ends the socket and gives the lock up at once, and resolves once every queued event is recorded', async () => {
      const instanceId = fixture.instanceIds[0] ?? '';
      const db = fixture.test.store.db;
      const fake = fakeFactory((sock) => sock.open());
      const engine = new BaileysEngine({
        locks: new SqlSessionLocks({ db, owner: 'node-a' }),
        logger: silentLogger(),
        socketFactory: fake.factory,
      });
      const rc = recordingContext(fixture, instanceId);
      await storePairedCreds(rc.context.auth);
      const recorded: string[] = [];
      // Each recording takes 50 ms (a busy store).
      const session = engine.createSession({
        ...rc.context,
        emit: async (event) => {
          if (event.type !== 'message') return;
          await sleep(50);
          recorded.push(event.message.id);
        },
      });
      try {
        await session.connect();
        const sock = fake.sockets.at(-1);
        assert.ok(sock);
        const ids = Array.from({ length: 10 }, (_, i) => `3EB0FENCED${i}`);
        sock.emit('messages.upsert', { type: 'notify', messages: ids.map(incoming) });
        await until(() => recorded.length >= 1, 2_000, 'the first event recorded');
        let closed = false;
        const closing = session.close({ fenced: true }).then(() => {
          closed = true;
        });
        await until(() => sock.ended > 0, 200, 'the socket ended');
        const lockRow = () =>
          db
            .selectFrom('instance_locks')
            .select('owner')
            .where('instance_id', '=', instanceId)
            .executeTakeFirst();
        await untilAsync(async () => (await lockRow()) === undefined, 'the lock given up', 300);
        assert.equal(closed, false, 'the close resolved before the queued events were recorded');
        await closing;
        assert.deepEqual(recorded, ids, 'an acknowledged event was dropped');
      } finally {
        await engine.close();
      }
    });
  });
}
