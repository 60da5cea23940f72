import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import { BaileysEngine } from '../../src/engines/baileys/index.ts';
import { statusOf } from '../../src/http/errors.ts';
import { SqlSessionLocks } from '../../src/sessions/instance-lock.ts';
import { eventually } from '../support/eventually.ts';
import { type LiveFixture, liveFixture, recordingContext, silentLogger } from './support.ts';

describe('live engine on a machine without the platform (real makeWASocket)', () => {
  let fixture: LiveFixture;
  before(async () => {
    fixture = await liveFixture('sqlite');
  });
  after(async () => {
    await fixture.test.cleanup();
  });

  it('rejects connect promptly with 503 and a clear message, leaving nothing running', async () => {
    const instanceId = fixture.instanceIds[0] ?? '';
    const engine = new BaileysEngine({
      locks: new SqlSessionLocks({ db: fixture.test.store.db, owner: 'p1' }),
      logger: silentLogger(),
    });
    const { context, events } = recordingContext(fixture, instanceId);
    const session = engine.createSession(context);
    const handlesBefore = process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap').length;
    const started = Date.now();
    await assert.rejects(session.connect(), (error: unknown) => {
      assert.ok(error instanceof DomainError);
      assert.equal(error.code, 'platform_unreachable');
      assert.equal(statusOf(error.code), 503);
      assert.match(error.message, /^cannot reach the platform: /);
      return true;
    });
    assert.ok(Date.now() - started < 9_000, `took ${Date.now() - started} ms`);
    const state = session.state();
    assert.equal(state.connected, false);
    assert.equal(state.loggedIn, false);
    assert.match(state.reason ?? '', /cannot reach the platform/);
    assert.deepEqual(events.at(-1), { type: 'connection', state });
    const lock = await fixture.test.store.db.selectFrom('instance_locks').selectAll().execute();
    assert.deepEqual(lock, [], 'the one-socket lock is released');
    // Closed sockets and timers leave the resource list a few ticks later: wait for it, fail with what stays.
    const handles = () => process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap').length;
    await eventually(
      `resources back to ${handlesBefore} (+1); still: ${process.getActiveResourcesInfo()}`,
      () => handles() <= handlesBefore + 1,
      2_000,
    );
    await engine.close();
  });
});
