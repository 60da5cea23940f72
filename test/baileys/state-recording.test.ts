/**
 * The live engine reports a connection state again when its recording failed (docs/decisions/0024-engines-and-
 * data-flow.md, docs/decisions/0076-status-with-its-write.md: a state whose recording failed is compared and
 * reported again): the pairing state at the next QR code, an open connection at the connect made again. Taken as
 * reported before its event was stored, the pairing state was emitted only on entering the phase and the connect
 * made again did nothing while the connection was up: the instance's `qr` or `connected` status was never recorded
 * while the session stayed in that phase.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ConnectionState, EngineEvent } from '../../src/domain/messages.ts';
import { BaileysEngine } from '../../src/engines/baileys/index.ts';
import type { EngineSession } from '../../src/engines/engine.ts';
import { SqlSessionLocks } from '../../src/sessions/instance-lock.ts';
import { type FakeSocket, fakeFactory, storePairedCreds } from './fake-socket.ts';
import { type LiveFixture, liveFixture, recordingContext, silentLogger, until } from './support.ts';

describe('live engine: a connection state whose recording failed is reported again', () => {
  let fixture: LiveFixture;
  let next = 0;
  const engines: BaileysEngine[] = [];
  before(async () => {
    fixture = await liveFixture('sqlite', 4);
  });
  after(async () => {
    await Promise.all(engines.map((e) => e.close()));
    await fixture.test.cleanup();
  });

  /**
   * A live session over a fake socket whose `connection` events are refused while `refuse` says so; `states` are
   * the connection states recorded, as [connected, loggedIn].
   */
  async function setup(options: {
    paired: boolean;
    open: (sock: FakeSocket, i: number) => void;
    refuse: (state: ConnectionState) => boolean;
  }): Promise<{ session: EngineSession; sock: () => FakeSocket; states: () => [boolean, boolean][] }> {
    const instanceId = fixture.instanceIds[next++] ?? '';
    const fake = fakeFactory(options.open);
    const engine = new BaileysEngine({
      locks: new SqlSessionLocks({ db: fixture.test.store.db, owner: 'p' }),
      logger: silentLogger(),
      socketFactory: fake.factory,
      ackTimeoutMs: 50,
      random: () => 0.5,
    });
    engines.push(engine);
    const rc = recordingContext(fixture, instanceId, () => Date.parse('2030-01-01T00:00:00Z'));
    if (options.paired) await storePairedCreds(rc.context.auth);
    const recorded = rc.context.emit;
    const session = engine.createSession({
      ...rc.context,
      emit: async (event: EngineEvent) => {
        if (event.type === 'connection' && options.refuse(event.state)) throw new Error('refused');
        await recorded(event);
      },
    });
    const sock = () => {
      const last = fake.sockets.at(-1);
      assert.ok(last, 'a socket exists');
      return last;
    };
    const states = () =>
      rc.events.flatMap((e): [boolean, boolean][] =>
        e.type === 'connection' ? [[e.state.connected, e.state.loggedIn]] : [],
      );
    return { session, sock, states };
  }

  it('a pairing state whose recording failed is recorded at the next QR code, then not again', async () => {
    let refusing = true;
    const { session, sock, states } = await setup({
      paired: false,
      open: (s) => s.qr('2@ref1,noise,identity,adv'),
      refuse: (state) => refusing && state.connected && !state.loggedIn,
    });
    await session.connect();
    await until(() => session.pairingCode() !== null, 2_000, 'pairing');
    assert.deepEqual(states(), []);
    refusing = false;
    sock().qr('2@ref2,noise,identity,adv');
    await until(() => states().length > 0, 2_000, 'the pairing state recorded');
    await new Promise((resolve) => setImmediate(resolve));
    sock().qr('2@ref3,noise,identity,adv');
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(states(), [[true, false]]);
  });

  it('an open state whose recording failed is recorded by the connect made again', async () => {
    let refusing = true;
    const { session, states } = await setup({
      paired: true,
      open: (s) => s.open(),
      refuse: (state) => refusing && state.connected,
    });
    await session.connect();
    assert.equal(session.state().connected, true);
    assert.deepEqual(states(), []);
    refusing = false;
    await session.connect();
    assert.deepEqual(states(), [[true, true]]);
    await session.connect();
    assert.deepEqual(states(), [[true, true]], 'a state recorded is not reported again');
  });
});
