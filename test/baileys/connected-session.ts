import type { Clock } from '../../src/domain/clock.ts';
import type { EngineSession } from '../../src/engines/engine.ts';
import { FakeSessions } from './fake-sessions.ts';
import type { FakeSocket } from './fake-socket.ts';
import { type LiveFixture, liveFixture, type RecordingContext } from './support.ts';

/** A live engine session over a fake socket, paired and connected (see {@link connectedFakeSession}). */
export interface ConnectedFakeSession {
  fixture: LiveFixture;
  session: EngineSession;
  rc: RecordingContext;
  /** The socket the session uses now (the last one the fake factory made). */
  sock: () => FakeSocket;
  /** Closes the engine and removes the store. */
  close: () => Promise<void>;
}

/**
 * The live engine over a fake socket that opens at once (fake-socket.ts), on a SQLite store with one live instance
 * whose credentials are stored paired: its session created and connected, its events kept in `rc` on `clock`
 * (default: the real time).
 */
export async function connectedFakeSession(clock: Clock = Date.now): Promise<ConnectedFakeSession> {
  const fixture = await liveFixture('sqlite', 1);
  const sessions = new FakeSessions(fixture);
  const { session, rc, sock } = await sessions.setup({ clock });
  await session.connect();
  return {
    fixture,
    session,
    rc,
    sock,
    close: async () => {
      await sessions.close();
      await fixture.test.cleanup();
    },
  };
}
