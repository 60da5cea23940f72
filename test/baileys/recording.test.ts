import assert from 'node:assert/strict';
import { after, before, describe, it, type TestContext } from 'node:test';
import { proto, type WAMessage } from 'baileys';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { readPairedCreds } from '../../src/engines/baileys/auth-state.ts';
import { BaileysEngine } from '../../src/engines/baileys/index.ts';
import {
  type AuthStateStore,
  type EngineSession,
  type EngineSessionContext,
  UnrecordedSendError,
} from '../../src/engines/engine.ts';
import { MessageProjection } from '../../src/events/message-projection.ts';
import { type EventProjection, EventRecorder } from '../../src/events/recorder.ts';
import { SqlSessionLocks } from '../../src/sessions/instance-lock.ts';
import { recordWithRetry } from '../../src/sessions/record-retry.ts';
import { SqlAuthStateStore } from '../../src/store/engine-auth.ts';
import { testDialects } from '../support/store.ts';
import { type FakeSocket, fakeFactory, storePairedCreds } from './fake-socket.ts';
import {
  capturingLogger,
  type LiveFixture,
  type LogLine,
  liveFixture,
  noEmitWith,
  until,
  untilAsync,
} from './support.ts';

const PEER = '5511988887777@s.whatsapp.net';
/** What the listener logs when an event could not be recorded (permanent store error or shutdown). */
const NOT_RECORDED = 'a platform event was not recorded: permanent store error or shutdown';
const OTHER = '5511977776666@s.whatsapp.net';

/** What a PostgreSQL connection reset looks like to the recorder (transient: worth retrying). */
function connectionReset(): Error {
  return Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
}

/** An AuthStateStore whose `clear()` fails while `failing` is set (store unreachable during a wipe). */
class FlakyClearStore implements AuthStateStore {
  failing = true;
  readonly #inner: AuthStateStore;
  constructor(inner: AuthStateStore) {
    this.#inner = inner;
  }
  get(category: string, ids: readonly string[]) {
    return this.#inner.get(category, ids);
  }
  set(entries: readonly { category: string; id: string; value: string | null }[]) {
    return this.#inner.set(entries);
  }
  list(category: string) {
    return this.#inner.list(category);
  }
  async clear() {
    if (this.failing) throw new Error('store unreachable');
    await this.#inner.clear();
  }
}

/** Key of an event in the tries/commit logs: the message id, `receipt:<ids>`, or the type. */
function keyOf(event: EngineEvent): string {
  if (event.type === 'message') return event.message.id;
  if (event.type === 'receipt') return `receipt:${event.messageIds.join(',')}`;
  return event.type;
}

function incoming(id: string, text: string, chat = PEER): WAMessage {
  return {
    key: { remoteJid: chat, fromMe: false, id },
    message: { conversation: text },
    messageTimestamp: 1_700_000_000,
    pushName: 'Ana',
  };
}

for (const dialect of testDialects()) {
  describe(`live engine: recording survives store failures (${dialect})`, () => {
    let fixture: LiveFixture;
    let next = 0;
    const engines: BaileysEngine[] = [];
    before(async () => {
      fixture = await liveFixture(dialect, 6);
    });
    after(async () => {
      await Promise.all(engines.map((e) => e.close()));
      await fixture.test.cleanup();
    });

    /**
     * A connected live session whose events go through a real EventRecorder (message store included) over the
     * fixture's store, with a projection in front that fails the events `fail` picks (on try `n`, 1-based).
     */
    async function setup(
      fail: (event: EngineEvent, n: number) => Error | undefined,
      options: {
        auth?: (inner: AuthStateStore) => AuthStateStore;
        open?: (s: FakeSocket, i: number) => void;
        /** Tries in all for any error (a caller that needs a bounded wait); default: as the manager, no bound. */
        attempts?: number;
      } = {},
    ) {
      const instanceId = fixture.instanceIds[next++] ?? '';
      const db = fixture.test.store.db;
      const { logger, lines } = capturingLogger();
      const tries = new Map<string, number>();
      const committed: string[] = [];
      const faulty: EventProjection = {
        name: 'faulty',
        async apply(_trx, _instanceId, event) {
          const key = keyOf(event);
          const n = (tries.get(key) ?? 0) + 1;
          tries.set(key, n);
          const error = fail(event, n);
          if (error) throw error;
        },
        afterCommit(_instanceId, event) {
          committed.push(keyOf(event));
        },
      };
      const recorder = new EventRecorder(db, [faulty, new MessageProjection(Date.now)], logger);
      const sql = new SqlAuthStateStore(db, fixture.box, instanceId);
      const auth = options.auth ? options.auth(sql) : sql;
      const events: EngineEvent[] = [];
      const context: EngineSessionContext = {
        instanceId,
        env: 'live',
        auth,
        // As the session manager does for every engine: the recorder behind the retry (waits shortened).
        emit: (event) =>
          recordWithRetry(
            {
              emit: async (tried) => {
                events.push(tried);
                await recorder.record(instanceId, tried);
              },
              logger,
            },
            event,
            {
              baseDelayMs: 1,
              maxDelayMs: 4,
              unknownAttempts: 5,
              random: () => 0.5,
              ...(options.attempts === undefined ? {} : { attempts: options.attempts }),
            },
          ),
        emitWith: noEmitWith,
        findMessage: async () => undefined,
        logger,
        clock: Date.now,
      };
      await storePairedCreds(auth);
      const fake = fakeFactory(options.open ?? ((sock) => sock.open()));
      const engine = new BaileysEngine({
        locks: new SqlSessionLocks({ db: db, owner: `proc-${dialect}` }),
        logger,
        socketFactory: fake.factory,
        ackTimeoutMs: 50,
        random: () => 0.5,
      });
      engines.push(engine);
      const session: EngineSession = engine.createSession(context);
      await session.connect();
      const sock = () => {
        const last = fake.sockets.at(-1);
        assert.ok(last, 'a socket exists');
        return last;
      };
      const rows = () =>
        db
          .selectFrom('messages')
          .select(['id', 'state'])
          .where('instance_id', '=', instanceId)
          .orderBy('id')
          .execute();
      const logged = (level: number, msg: string) => lines.filter((l) => l.level === level && l.msg === msg);
      return { session, sock, rows, lines, logged, tries, committed, events, auth };
    }

    it('a batch of A, B, C where recording B fails once: all three recorded, in order (R2)', async () => {
      const h = await setup((event, n) =>
        event.type === 'message' && event.message.id === '3EB0B' && n === 1 ? connectionReset() : undefined,
      );
      h.sock().emit('messages.upsert', {
        type: 'notify',
        messages: [incoming('3EB0A', 'body A'), incoming('3EB0B', 'body B'), incoming('3EB0C', 'body C')],
      });
      await untilAsync(async () => (await h.rows()).length === 3, 'three message rows');
      assert.deepEqual(
        (await h.rows()).map((r) => r.id),
        ['3EB0A', '3EB0B', '3EB0C'],
      );
      assert.deepEqual(
        h.committed.filter((k) => k !== 'connection'),
        ['3EB0A', '3EB0B', '3EB0C'],
        'per-instance order kept',
      );
      assert.equal(h.tries.get('3EB0B'), 2);
      const retry = h.logged(40, 'recording an event failed; retrying');
      assert.equal(retry.length, 1);
      assert.deepEqual(
        {
          event: retry[0]?.event,
          id: retry[0]?.id,
          attempt: retry[0]?.attempt,
          attempts: retry[0]?.attempts,
        },
        { event: 'message', id: '3EB0B', attempt: 1, attempts: undefined },
      );
      assert.deepEqual(h.logged(50, NOT_RECORDED), []);
    });

    it('retries a store that cannot be reached until it answers, in order; a permanent error is logged, not retried', async () => {
      // B and the receipt of 3EB0Z fail 12 times (beyond the old bound of 5 tries), then the store answers.
      const h = await setup((event, n) => {
        if (event.type === 'message' && event.message.id === '3EB0B' && n <= 12) return connectionReset();
        if (event.type === 'receipt' && event.source.chat === OTHER && n <= 12) return connectionReset();
        if (event.type === 'message' && event.message.id === '3EB0E')
          return Object.assign(new Error('duplicate key value violates unique constraint'), {
            code: '23505',
          });
        return undefined;
      });
      h.sock().emit('messages.upsert', {
        type: 'notify',
        messages: [incoming('3EB0A', 'body A'), incoming('3EB0B', 'body B'), incoming('3EB0C', 'body C')],
      });
      h.sock().emit('messages.update', [
        {
          key: { remoteJid: OTHER, fromMe: true, id: '3EB0Z' },
          update: { status: proto.WebMessageInfo.Status.READ },
        },
        {
          // Another device of the account read the peer's message A.
          key: { remoteJid: PEER, fromMe: false, id: '3EB0A' },
          update: { status: proto.WebMessageInfo.Status.READ },
        },
      ]);
      h.sock().emit('messages.upsert', {
        type: 'notify',
        messages: [incoming('3EB0D', 'body D'), incoming('3EB0E', 'body E')],
      });
      await until(() => h.logged(50, NOT_RECORDED).length === 1, 10_000, 'the permanent failure logged');
      assert.deepEqual(await h.rows(), [
        { id: '3EB0A', state: 'read' },
        { id: '3EB0B', state: 'delivered' },
        { id: '3EB0C', state: 'delivered' },
        { id: '3EB0D', state: 'delivered' },
      ]);
      assert.deepEqual(
        h.committed.filter((k) => k !== 'connection'),
        ['3EB0A', '3EB0B', '3EB0C', 'receipt:3EB0Z', 'receipt:3EB0A', '3EB0D'],
        'arrival order kept across the retries',
      );
      assert.equal(h.tries.get('3EB0B'), 13, 'tried until the store answered');
      assert.equal(h.tries.get('receipt:3EB0Z'), 13);
      assert.equal(h.tries.get('3EB0E'), 1, 'a constraint violation is not retried');
      const lost = h.logged(50, NOT_RECORDED).map((l: LogLine) => ({ event: l.event, id: l.id }));
      assert.deepEqual(lost, [{ event: 'message', id: '3EB0E' }]);
      // The first failure and the tenth are logged, not every try.
      assert.deepEqual(
        h
          .logged(40, 'recording an event failed; retrying')
          .filter((l) => l.id === '3EB0B')
          .map((l) => l.attempt),
        [1, 10],
      );
      assert.ok(!JSON.stringify(h.lines).includes('body '), 'no message body is logged');
    });

    it('a send answers only once recorded: a transient failure is retried, a lasting one fails the call, saying the message went out (C4)', async () => {
      let mode: 'once' | 'always' = 'once';
      // A caller that needs a bounded wait passes one (5 tries in all).
      const h = await setup(
        (event, n) =>
          event.type === 'message' && event.message.source.isFromMe && (mode === 'always' || n === 1)
            ? connectionReset()
            : undefined,
        { attempts: 5 },
      );
      const sent = await h.session.send({
        to: PEER,
        content: { kind: 'text', text: 'hi', linkPreview: false },
      });
      assert.deepEqual(await h.rows(), [{ id: sent.id, state: 'sent' }]);
      assert.equal(h.tries.get(sent.id), 2);
      mode = 'always';
      await assert.rejects(
        h.session.send({ to: PEER, content: { kind: 'text', text: 'lost?', linkPreview: false } }),
        (error: unknown) => {
          // The message went out: the error says so and carries what the send would have answered.
          assert.ok(error instanceof UnrecordedSendError, String(error));
          assert.match(String(error.cause), /read ECONNRESET/);
          assert.equal(error.sent.id, h.sock().relayed[1]?.messageId);
          return true;
        },
      );
      assert.equal(h.sock().relayed.length, 2, 'the message was relayed');
      const lostId = h.sock().relayed[1]?.messageId ?? '';
      assert.equal(h.tries.get(lostId), 5);
      assert.deepEqual(await h.rows(), [{ id: sent.id, state: 'sent' }]);
      const line = h.logged(
        50,
        'a message was relayed to the platform but recording it failed after retrying',
      );
      assert.deepEqual(
        line.map((l) => ({ event: l.event, id: l.id, chat: l.chat })),
        [{ event: 'message', id: lostId, chat: PEER }],
      );
      assert.ok(!JSON.stringify(h.lines).includes('lost?'), 'no message body is logged');
    });

    it('a 401 close while the store cannot delete the credentials: no unhandled rejection, stopped, logged (R3)', async (t: TestContext) => {
      const rejections: unknown[] = [];
      const onRejection = (reason: unknown) => {
        rejections.push(reason);
      };
      process.on('unhandledRejection', onRejection);
      t.after(() => {
        process.off('unhandledRejection', onRejection);
      });
      let flaky: FlakyClearStore | undefined;
      const h = await setup(() => undefined, {
        auth: (inner) => {
          flaky = new FlakyClearStore(inner);
          return flaky;
        },
        open: (sock, i) => (i === 0 ? sock.open() : sock.qr('2@fresh,pairing')),
      });
      assert.ok(flaky);
      assert.equal(h.session.state().loggedIn, true);
      h.sock().close(401, 'Connection Failure');
      const failed =
        'deleting the stored platform credentials failed; they are deleted before the next connect';
      await until(() => h.logged(50, failed).length === 1, 2_000, 'the wipe failure logged');
      await until(
        () => h.events.at(-1)?.type === 'connection' && !h.session.state().connected,
        2_000,
        'stopped',
      );
      for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(rejections, []);
      assert.equal(
        (h.logged(50, failed)[0]?.err as { message?: string } | undefined)?.message,
        'store unreachable',
      );
      const state = h.session.state();
      assert.deepEqual(
        { connected: state.connected, loggedIn: state.loggedIn },
        { connected: false, loggedIn: false },
      );
      assert.match(
        state.reason ?? '',
        /^logged out \(401\).*\(deleting the stored credentials failed: retried/,
      );
      assert.deepEqual(h.events.at(-1), { type: 'connection', state });
      assert.ok(await readPairedCreds(flaky), 'credentials are still stored');
      flaky.failing = false;
      await h.session.connect();
      assert.equal(await readPairedCreds(flaky), null, 'deleted before the next connect');
      assert.deepEqual(
        { connected: h.session.state().connected, loggedIn: h.session.state().loggedIn },
        { connected: true, loggedIn: false },
      );
      assert.equal(h.session.pairingCode()?.code, '2@fresh,pairing');
    });
  });
}
