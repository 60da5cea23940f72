import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import { DeferredEngine } from '../../src/engines/deferred.ts';
import type { EngineSessionContext } from '../../src/engines/engine.ts';
import { createTestApp } from '../support/app.ts';
import { FakeEngine } from '../support/fake-engine.ts';

/** A deferred engine over a {@link FakeEngine} that counts its loads and can be made to fail the next ones. */
function deferredFake(failures = 0) {
  const counts = { loads: 0, closes: 0 };
  const engine = Object.assign(new FakeEngine(), {
    async close() {
      counts.closes += 1;
    },
  });
  let failing = failures;
  const deferred = new DeferredEngine('baileys', async () => {
    counts.loads += 1;
    // A turn in between, as an import has: concurrent callers arrive while it runs.
    await new Promise((resolve) => setImmediate(resolve));
    if (failing > 0) {
      failing -= 1;
      throw new Error('cannot load the engine module');
    }
    return engine;
  });
  return { engine, deferred, counts };
}

describe('engines loaded at their first session (docs/decisions/0068-engines-loaded-on-first-use.md)', () => {
  it('loads once for concurrent first sessions, and the manager makes one session of them', async () => {
    const { deferred, counts } = deferredFake();
    const t = await createTestApp({ liveEngine: deferred });
    try {
      assert.equal(counts.loads, 0, 'nothing is loaded at boot');
      const live = await t.newInstance('live');
      const [a, b] = await Promise.all([
        t.services.sessions.session(live),
        t.services.sessions.session(live),
      ]);
      assert.equal(a, b);
      assert.equal(counts.loads, 1);
      await t.services.sessions.session(await t.newInstance('live'));
      assert.equal(counts.loads, 1);
    } finally {
      await t.close();
    }
    assert.equal(counts.closes, 1, 'the loaded engine is closed with the services');
  });

  it('passes a failed load to its caller and loads again at the next session', async () => {
    const { deferred, counts } = deferredFake(1);
    const t = await createTestApp({ liveEngine: deferred });
    try {
      const live = await t.newInstance('live');
      await assert.rejects(t.services.sessions.session(live), /cannot load the engine module/);
      assert.equal(t.services.sessions.existing(live.id), undefined);
      const session = await t.services.sessions.session(live);
      assert.equal(t.services.sessions.existing(live.id), session);
      assert.equal(counts.loads, 2);
    } finally {
      await t.close();
    }
  });

  it('makes no session once shutdown began while the engine was loading', async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const engine = new FakeEngine();
    const deferred = new DeferredEngine('baileys', async () => {
      await held;
      return engine;
    });
    const t = await createTestApp({ liveEngine: deferred });
    try {
      const live = await t.newInstance('live');
      const asked = t.services.sessions.session(live);
      const closed = t.services.sessions.closeAll();
      release();
      await closed;
      await assert.rejects(asked, (error: unknown) => {
        assert.ok(error instanceof DomainError);
        assert.equal(error.code, 'not_ready');
        assert.equal(error.message, 'server is shutting down');
        return true;
      });
      assert.equal(t.services.sessions.existing(live.id), undefined);
      assert.equal(engine.behaviour.connects, 0);
    } finally {
      await t.close();
    }
  });

  it("tries again after the loaded engine's own init failed", async () => {
    let inits = 0;
    const engine = Object.assign(new FakeEngine(), {
      async init() {
        inits += 1;
        if (inits === 1) throw new Error('engine init failed');
      },
    });
    const deferred = new DeferredEngine('baileys', async () => engine);
    await assert.rejects(deferred.init(), /engine init failed/);
    await deferred.init();
    assert.equal(inits, 2);
    await deferred.init();
    assert.equal(inits, 2, 'a prepared engine is not prepared again');
  });

  it('refuses a session before init and after close, and closing an engine never loaded loads nothing', async () => {
    const { deferred, counts } = deferredFake();
    assert.throws(
      () => deferred.createSession({} as EngineSessionContext),
      /engine baileys used before init\(\) resolved/,
    );
    await deferred.close();
    assert.deepEqual(counts, { loads: 0, closes: 0 });
    await assert.rejects(deferred.init(), /engine baileys is closed/);
    assert.throws(() => deferred.createSession({} as EngineSessionContext), /engine baileys is closed/);
    assert.equal(counts.loads, 0);
  });
});
