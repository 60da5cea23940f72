import assert from 'node:assert/strict';
import type { Clock } from '../../src/domain/clock.ts';
import { BaileysEngine } from '../../src/engines/baileys/index.ts';
import type { EngineSession } from '../../src/engines/engine.ts';
import { SqlSessionLocks } from '../../src/sessions/instance-lock.ts';
import { type FakeSocket, fakeFactory, storePairedCreds } from './fake-socket.ts';
import {
  type LiveFixture,
  liveFixture,
  type RecordingContext,
  recordingContext,
  silentLogger,
} from './support.ts';

/** A live engine session over a fake socket, paired and connected (see {@link connectedFakeSession}). */
export interface ConnectedFakeSession {
  fixture: LiveFixture;
  engine: BaileysEngine;
  session: EngineSession;
  rc: RecordingContext;
  /** The socket the session uses now (the last one the fake factory made). */
  sock: () => FakeSocket;
  /** Closes the engine and removes the store. */
  close: () => Promise<void>;
}

/**
 * The live engine over a fake socket that opens at once (fake-socket.ts), on a SQLite store with one live instance
 * whose credentials are stored paired: its session created and connected, its events kept in `rc` on `clock`.
 */
export async function connectedFakeSession(clock?: Clock): Promise<ConnectedFakeSession> {
  const fixture = await liveFixture('sqlite', 1);
  const fake = fakeFactory((s) => s.open());
  const engine = new BaileysEngine({
    locks: new SqlSessionLocks({ db: fixture.test.store.db, owner: 'p' }),
    logger: silentLogger(),
    socketFactory: fake.factory,
    ackTimeoutMs: 50,
    random: () => 0.5,
  });
  const rc = recordingContext(fixture, fixture.instanceIds[0] ?? '', clock);
  await storePairedCreds(rc.context.auth);
  const session = engine.createSession(rc.context);
  const sock = () => {
    const last = fake.sockets.at(-1);
    assert.ok(last, 'a socket exists');
    return last;
  };
  await session.connect();
  return {
    fixture,
    engine,
    session,
    rc,
    sock,
    close: async () => {
      await engine.close();
      await fixture.test.cleanup();
    },
  };
}
