import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import type { WAMessage } from 'baileys';
import pino from 'pino';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { BaileysEngine } from '../../src/engines/baileys/index.ts';
import type { Engine, EngineSessionContext } from '../../src/engines/engine.ts';
import { SecretBox } from '../../src/security/secrets.ts';
import { SqlSessionLocks } from '../../src/sessions/instance-lock.ts';
import { SessionManager } from '../../src/sessions/manager.ts';
import { getInstance } from '../../src/store/instances.ts';
import { fakeFactory, storePairedCreds } from '../baileys/fake-socket.ts';
import { liveFixture, silentLogger, until, untilAsync } from '../baileys/support.ts';
import { storeOutage, type TestDialect, testDialects } from '../support/store.ts';

/**
 * The bound of a fenced close (docs/decisions/0008-leases-and-fencing.md, docs/decisions/0011-store-faults.md): a node
 * that lost an instance's lease closes its live session fenced while the store is away, with platform events the
 * socket received (and acknowledged) still queued to be recorded. The socket ends and the one-socket lock is given
 * up at once, so the new owner's connection does not wait for the old node's recordings; the close itself lasts
 * until those events are recorded, since the platform never hands them over again: it does not end while the store
 * is away, ends once the store answers (each event recorded once), and at shutdown ends after one last try of each
 * recording, the events not recorded then logged. The lease keeper never waits for it in its rounds
 * (test/nodes/lease-round.test.ts), and a new session of the instance on this node waits for it
 * (test/session/release-close.test.ts).
 */

const PEER = '5511988887777@s.whatsapp.net';

const incoming = (id: string): WAMessage => ({
  key: { remoteJid: PEER, fromMe: false, id },
  message: { conversation: `m ${id}` },
  messageTimestamp: 1_700_000_000,
  pushName: 'Ana',
});

/**
 * A session manager whose live engine runs on fake sockets, with a recorder whose store is away while `down` is
 * set (message events only; every other event is taken at once); the instance's session is connected.
 */
async function connectedSession(dialect: TestDialect) {
  const fixture = await liveFixture(dialect, 1);
  const db = fixture.test.store.db;
  const instanceId = fixture.instanceIds[0] ?? '';
  const fake = fakeFactory((sock) => sock.open());
  const baileys = new BaileysEngine({
    locks: new SqlSessionLocks({ db, owner: 'node-a' }),
    logger: silentLogger(),
    socketFactory: fake.factory,
  });
  const contexts: EngineSessionContext[] = [];
  const engine: Engine = {
    name: 'baileys',
    createSession: (context) => {
      contexts.push(context);
      return baileys.createSession(context);
    },
  };
  const store = { down: false, tries: 0 };
  const recorded: string[] = [];
  const unrecorded: string[] = [];
  const recorder = {
    record: async (_instanceId: string, event: EngineEvent) => {
      if (event.type !== 'message') return;
      store.tries += 1;
      if (store.down) throw storeOutage(dialect);
      recorded.push(event.message.id);
    },
    recordWith: async () => ({ result: undefined }),
    unrecorded: (_instanceId: string, event: EngineEvent) => {
      if (event.type === 'message') unrecorded.push(event.message.id);
    },
    drain: async () => undefined,
  };
  const sessions = new SessionManager({
    db,
    box: new SecretBox(randomBytes(32)),
    engines: { test: engine, live: engine },
    recorder: recorder as never,
    findMessage: async () => undefined,
    logger: pino({ level: 'silent' }),
    clock: Date.now,
    recordRetry: { baseDelayMs: 1, maxDelayMs: 20, random: () => 0.5 },
  });
  const instance = await getInstance(db, instanceId);
  assert.ok(instance);
  const session = await sessions.session(instance);
  const [context] = contexts;
  assert.ok(context);
  await storePairedCreds(context.auth);
  await session.connect();
  const sock = fake.sockets.at(-1);
  assert.ok(sock);
  await until(() => session.state().connected, 2_000, 'connected');
  const lockRow = () =>
    db.selectFrom('instance_locks').select('owner').where('instance_id', '=', instanceId).executeTakeFirst();
  return { fixture, sessions, instanceId, sock, store, recorded, unrecorded, lockRow, baileys };
}

for (const dialect of testDialects()) {
  describe(`a fenced close while the store is away (${dialect})`, () => {
    it('gives the socket and the lock up at once, lasts while the store is away, and ends once it answers, each event recorded once', async () => {
      const t = await connectedSession(dialect);
      try {
        t.store.down = true;
        const ids = ['3EB0BOUND0', '3EB0BOUND1', '3EB0BOUND2'];
        t.sock.emit('messages.upsert', { type: 'notify', messages: ids.map(incoming) });
        await until(() => t.store.tries >= 2, 2_000, 'the first recording retrying');
        let closed = false;
        const closing = t.sessions.release(t.instanceId, { fenced: true }).then(() => {
          closed = true;
        });
        await until(() => t.sock.ended > 0, 200, 'the socket ended');
        await untilAsync(async () => (await t.lockRow()) === undefined, 'the lock given up', 300);
        // The recording goes on trying while the store is away; the close waits for it.
        const triesAtRelease = t.store.tries;
        await until(() => t.store.tries >= triesAtRelease + 5, 2_000, 'five more tries');
        assert.equal(closed, false, 'the close ended with acknowledged events not recorded');
        assert.deepEqual(t.recorded, []);
        t.store.down = false;
        await closing;
        assert.deepEqual(t.recorded, ids, 'each acknowledged event recorded once, in order');
        assert.deepEqual(t.unrecorded, []);
      } finally {
        await t.sessions.closeAll();
        await t.baileys.close();
        await t.fixture.test.cleanup();
      }
    });

    it('at shutdown, with the store still away, ends after one last try of each recording', async () => {
      const t = await connectedSession(dialect);
      try {
        t.store.down = true;
        const ids = ['3EB0SHUT0', '3EB0SHUT1'];
        t.sock.emit('messages.upsert', { type: 'notify', messages: ids.map(incoming) });
        await until(() => t.store.tries >= 2, 2_000, 'the first recording retrying');
        let closed = false;
        const closing = t.sessions.release(t.instanceId, { fenced: true }).then(() => {
          closed = true;
        });
        await untilAsync(async () => (await t.lockRow()) === undefined, 'the lock given up', 300);
        assert.equal(closed, false);
        const started = Date.now();
        await t.sessions.closeAll();
        assert.equal(closed, true, 'the shutdown waited for the fenced close, which ended');
        await closing;
        assert.ok(Date.now() - started < 2_000, `the shutdown took ${Date.now() - started} ms`);
        assert.deepEqual(t.recorded, []);
        // Given up at shutdown (one last try each): the first the line was retrying, and the one queued behind it.
        assert.deepEqual(t.unrecorded, ids);
      } finally {
        await t.baileys.close();
        await t.fixture.test.cleanup();
      }
    });
  });
}
