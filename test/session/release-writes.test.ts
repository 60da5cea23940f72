import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { SessionReleasedError } from '../../src/domain/errors.ts';
import type { EngineSessionContext } from '../../src/engines/engine.ts';
import type { SessionManager } from '../../src/sessions/manager.ts';
import { eventually } from '../support/eventually.ts';
import { sessionsWithContexts } from '../support/fake-engine.ts';
import { createTestStore, storeOutage, type TestStore, testDialects } from '../support/store.ts';
import { textMessage } from '../webhooks/support.ts';

/**
 * A released session writes nothing more (docs/decisions/0008-leases-and-fencing.md): its instance's lease was lost
 * or is about to expire, and the node taking it over writes newer Signal keys. A key write of the old session that
 * was waiting out an unreachable store must stop when the session is released, not land once the store returns and
 * overwrite the new owner's keys. Its recordings are not stopped: the platform was told of their events, and a late
 * one overwrites nothing (docs/decisions/0011-store-faults.md).
 */

/**
 * A session manager on `testStore` with one live instance whose session is open, and the context its engine got
 * (to write keys and emit events as an engine does); `recorder` records the session's events.
 */
async function openSession(
  testStore: TestStore,
  recorder: unknown,
): Promise<{ sessions: SessionManager; instanceId: string; context: EngineSessionContext }> {
  const db = testStore.store.db;
  const org = await adminCreateOrg(db, { name: `r-${Math.random()}`, plan: 'pro' });
  const instance = await adminCreateInstance(db, { org: org.id, env: 'live', name: 'main' });
  const { sessions, contexts } = sessionsWithContexts(db, recorder);
  await sessions.session(instance);
  const [context] = contexts;
  assert.ok(context);
  return { sessions, instanceId: instance.id, context };
}

for (const dialect of testDialects()) {
  describe(`a released session's pending writes (${dialect})`, () => {
    it('a key write waiting out the store stops when the session is released, and never lands', async () => {
      let down = false;
      let tries = 0;
      const testStore = await createTestStore(dialect, {
        faults: (sql) => {
          if (!/insert into "engine_auth"/i.test(sql)) return;
          tries += 1;
          if (down) throw storeOutage(dialect);
        },
      });
      try {
        const db = testStore.store.db;
        const { sessions, instanceId, context } = await openSession(testStore, {});

        down = true;
        const write = context.auth.set([{ category: 'session', id: 'peer.0', value: 'stale ratchet' }]).then(
          () => 'written',
          (error: unknown) => error,
        );
        await eventually('the write retrying', () => tries >= 3);
        // The lease is lost: the session is released (fenced), then the store comes back.
        await sessions.release(instanceId, { fenced: true });
        const triesAtRelease = tries;
        down = false;
        const outcome = await write;
        assert.notEqual(outcome, 'written', 'the stale write landed after the release');
        assert.ok(tries === triesAtRelease, `tried ${tries - triesAtRelease} more times after the release`);
        const rows = await db
          .selectFrom('engine_auth')
          .select('key_id')
          .where('instance_id', '=', instanceId)
          .execute();
        assert.deepEqual(rows, [], 'no key stored');
        // A write the released session starts afterwards is refused without reaching the store.
        await assert.rejects(
          context.auth.set([{ category: 'session', id: 'peer.0', value: 'later' }]),
          SessionReleasedError,
        );
        assert.equal(tries, triesAtRelease);
      } finally {
        await testStore.cleanup();
      }
    });

    it('a recording waiting out the store goes on after a fenced release and lands once the store returns', async () => {
      const testStore = await createTestStore(dialect);
      try {
        // A recorder whose store is away until the test brings it back.
        let down = false;
        let tries = 0;
        const recorded: string[] = [];
        const recorder = {
          record: async (_instanceId: string, event: { type: string }) => {
            tries += 1;
            if (down) throw storeOutage(dialect);
            recorded.push(event.type);
          },
          drain: async () => undefined,
        };
        const { sessions, instanceId, context } = await openSession(testStore, recorder);
        down = true;
        // An event the platform handed over (and was acknowledged) while the store is away.
        const recording = context.emit(textMessage('acknowledged before the outage ended'));
        await eventually('the recording retrying', () => tries >= 3);
        await sessions.release(instanceId, { fenced: true });
        down = false;
        await recording;
        assert.deepEqual(recorded, ['message'], 'the acknowledged event is recorded, not dropped');
      } finally {
        await testStore.cleanup();
      }
    });

    it('an engine-state write with its events stops at a fenced release, as key writes do', async () => {
      const testStore = await createTestStore(dialect);
      try {
        let down = false;
        let tries = 0;
        const recorder = {
          recordWith: async () => {
            tries += 1;
            if (down) throw storeOutage(dialect);
            throw new Error('the store is up: nothing to write in this test');
          },
          // Told of the item's events when it is given up (src/events/recorder.ts `unrecorded`).
          unrecorded: () => undefined,
          drain: async () => undefined,
        };
        const { sessions, instanceId, context } = await openSession(testStore, recorder);
        down = true;
        const write = context
          .emitWith([{ category: 'sandbox-groups', id: 'g1', value: 'stale' }], [textMessage('with state')])
          .then(
            () => 'written',
            (error: unknown) => error,
          );
        await eventually('the item retrying', () => tries >= 3);
        await sessions.release(instanceId, { fenced: true });
        const triesAtRelease = tries;
        down = false;
        const outcome = await write;
        assert.ok(outcome instanceof SessionReleasedError, `got ${String(outcome)}`);
        assert.equal(tries, triesAtRelease, 'no try after the release');
      } finally {
        await testStore.cleanup();
      }
    });
  });
}
