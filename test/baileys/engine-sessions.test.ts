import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { BaileysEngine } from '../../src/engines/baileys/index.ts';
import { SqlSessionLocks } from '../../src/sessions/instance-lock.ts';
import { eventually } from '../support/eventually.ts';
import { type LiveFixture, liveFixture, recordingContext, silentLogger } from './support.ts';

setFlagsFromString('--expose-gc');
/** V8's collector, made callable in this process (the flag above, then a new context picks up `gc`). */
const collect = runInNewContext('gc') as () => void;

describe('the live engine holds its sessions weakly (src/engines/baileys/index.ts)', () => {
  let fixture: LiveFixture;
  before(async () => {
    fixture = await liveFixture('sqlite');
  });
  after(async () => {
    await fixture.test.cleanup();
  });

  it('a session nobody holds is collected, and close() still closes the ones held', async () => {
    const instanceId = fixture.instanceIds[0] ?? '';
    const engine = new BaileysEngine({
      locks: new SqlSessionLocks({ db: fixture.test.store.db, owner: 'p1' }),
      logger: silentLogger(),
    });
    // A media download's session: made, used without a connection, then dropped.
    const collected = new Set<number>();
    const watch = new FinalizationRegistry<number>((n) => collected.add(n));
    for (let n = 0; n < 20; n++)
      watch.register(engine.createSession(recordingContext(fixture, instanceId).context), n);
    const held = engine.createSession(recordingContext(fixture, instanceId).context);
    await eventually(
      `dropped sessions collected (${collected.size} of 20 so far)`,
      () => {
        collect();
        return collected.size === 20;
      },
      5_000,
    );
    let closed = 0;
    const close = held.close.bind(held);
    held.close = async () => {
      closed += 1;
      await close();
    };
    await engine.close();
    assert.equal(closed, 1);
  });
});
