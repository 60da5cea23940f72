import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import pino from 'pino';
import { DomainError, errors } from '../../src/domain/errors.ts';
import type { Engine } from '../../src/engines/engine.ts';
import { EventRecorder } from '../../src/events/recorder.ts';
import { statusOf } from '../../src/http/errors.ts';
import { LeaseKeeper } from '../../src/nodes/leases.ts';
import { SecretBox } from '../../src/security/secrets.ts';
import { SessionManager } from '../../src/sessions/manager.ts';
import { setNodeEndpoint } from '../../src/store/leases.ts';
import type { Database } from '../../src/store/schema.ts';
import { eventually } from '../support/eventually.ts';
import { FakeEngine } from '../support/fake-engine.ts';
import { createTestStore, testDialects } from '../support/store.ts';
import { setup } from './lease-support.ts';

/**
 * On several nodes a session's restore is the lease keeper's (docs/decisions/0008-leases-and-fencing.md), and its
 * answers while it is down are those of one node (docs/decisions/0016-session-lifecycle.md): `503` with
 * `Retry-After` while it comes back by itself (its restore found the platform unreachable and the keeper's next
 * round tries again), `409 instance is not connected: <reason>` once it is stopped until `connect` (the platform
 * replaced it), which no round reconnects. Before, a restore that failed answered the 409 although the next round
 * restored it, and a session the platform had replaced was reconnected by the next round, against its 409.
 */

/** A session manager on `db` whose sessions are `engine`'s, in both environments. */
function sessionsOver(db: Kysely<Database>, engine: Engine): SessionManager {
  return new SessionManager({
    db,
    box: new SecretBox(randomBytes(32)),
    engines: { test: engine, live: engine },
    recorder: new EventRecorder(db, [], pino({ level: 'silent' })),
    findMessage: async () => undefined,
    logger: pino({ level: 'silent' }),
    clock: Date.now,
    recordRetry: { baseDelayMs: 1, maxDelayMs: 2, random: () => 0.5 },
  });
}

/**
 * A store with one instance wanted connected where `node-a` is the only serving node, a session manager over
 * `engine` and `node-a`'s lease keeper over it (its rounds run by hand), and the keeper's log lines.
 */
async function oneNode(dialect: 'sqlite' | 'postgres', engine: Engine) {
  const testStore = await createTestStore(dialect);
  const { db, instances } = await setup(testStore, 1);
  const [instance] = instances;
  assert.ok(instance);
  await db.deleteFrom('nodes').where('id', '=', 'node-b').execute();
  await setNodeEndpoint(db, 'node-a', { url: 'http://a.invalid', draining: false });
  const sessions = sessionsOver(db, engine);
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line).msg) });
  const keeper = new LeaseKeeper({ db, nodeId: 'node-a', sessions, logger, heartbeatMs: 60_000 });
  return { testStore, instance, sessions, keeper, lines };
}

/** What `ready` throws for `instance`: [HTTP status, `Retry-After` (s), message]; `ready` when it answers. */
function readyError(sessions: SessionManager, instance: Parameters<SessionManager['ready']>[0]) {
  try {
    sessions.ready(instance);
  } catch (error) {
    assert.ok(error instanceof DomainError);
    return [statusOf(error.code), error.retryAfter, error.message];
  }
  return 'ready';
}

/**
 * A {@link FakeEngine} (its `behaviour` counts connects) whose sessions' first connect fails with `error`, the
 * sessions reading `reason` as why they stopped once `stopped()` is true.
 */
function engineFailingOnce(error: Error | undefined, stopped = () => false, reason = '') {
  const fake = new FakeEngine();
  let failed = error === undefined;
  const engine: Engine = {
    name: 'baileys',
    createSession: (context) => {
      const session = fake.createSession(context);
      const { connect, state } = session;
      return {
        ...session,
        connect: async () => {
          if (!failed) {
            failed = true;
            fake.behaviour.connects += 1;
            throw error;
          }
          return connect();
        },
        state: () => (stopped() ? { ...state(), connected: false, reason } : state()),
      };
    },
  };
  return { engine, behaviour: fake.behaviour };
}

for (const dialect of testDialects()) {
  describe(`a session's answers while the lease keeper restores it (${dialect})`, () => {
    const failures: [string, Error][] = [
      [
        'found the platform unreachable',
        new DomainError('platform_unreachable', 'cannot reach the platform: down'),
      ],
      ['found the store unavailable', errors.storeUnavailable()],
      [
        'found the one-socket lock held',
        new DomainError('conflict', 'instance is connected by another parley process'),
      ],
    ];
    for (const [what, error] of failures) {
      it(`a restore that ${what} answers 503 with Retry-After until the next round restores it`, async () => {
        const { engine, behaviour } = engineFailingOnce(error);
        const { testStore, instance, sessions, keeper, lines } = await oneNode(dialect, engine);
        try {
          await keeper.tick();
          await eventually('the restore failed', () =>
            lines.some((line) => /restoring a session failed/.test(line)),
          );
          assert.equal(behaviour.connects, 1);
          assert.deepEqual(
            readyError(sessions, instance),
            [503, 2, 'not connected to the platform right now'],
            'answered as stopped although the next round restores it',
          );
          await keeper.tick();
          await eventually(
            'restored at the next round',
            () => sessions.existing(instance.id)?.state().connected,
          );
          assert.equal(behaviour.connects, 2);
          assert.equal(readyError(sessions, instance), 'ready');
        } finally {
          await sessions.closeAll();
          await testStore.cleanup();
        }
      });
    }

    it('a restore the platform refused answers 409 with its reason, and no round connects it again', async () => {
      const reason =
        'forbidden by the platform (403): the account may be banned or the phone unlinked; not reconnecting';
      let refused = false;
      const { engine, behaviour } = engineFailingOnce(
        new DomainError('platform_refused', reason),
        () => refused,
        reason,
      );
      const { testStore, instance, sessions, keeper, lines } = await oneNode(dialect, engine);
      try {
        refused = true;
        await keeper.tick();
        await eventually('the restore failed', () =>
          lines.some((line) => /restoring a session failed/.test(line)),
        );
        assert.deepEqual(readyError(sessions, instance), [
          409,
          undefined,
          `instance is not connected: ${reason}`,
        ]);
        await keeper.tick();
        await keeper.ensureRestored(instance);
        assert.equal(behaviour.connects, 1, 'a round connected the session the platform refused again');
      } finally {
        await sessions.closeAll();
        await testStore.cleanup();
      }
    });

    it('a session the platform stopped answers 409 with its reason, and no round connects it again', async () => {
      const reason = 'replaced (440): another client connected with these credentials; not reconnecting';
      let replaced = false;
      const { engine, behaviour } = engineFailingOnce(undefined, () => replaced, reason);
      const { testStore, instance, sessions, keeper, lines } = await oneNode(dialect, engine);
      try {
        await keeper.tick();
        await eventually('restored', () => lines.includes('session restored on this node'));
        assert.equal(sessions.existing(instance.id)?.state().connected, true);
        replaced = true;
        assert.deepEqual(readyError(sessions, instance), [
          409,
          undefined,
          `instance is not connected: ${reason}`,
        ]);
        await keeper.tick();
        await keeper.ensureRestored(instance);
        assert.equal(behaviour.connects, 1, 'a round connected the session the platform replaced again');
        assert.deepEqual(readyError(sessions, instance), [
          409,
          undefined,
          `instance is not connected: ${reason}`,
        ]);
      } finally {
        await sessions.closeAll();
        await testStore.cleanup();
      }
    });
  });
}
