import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import type { Clock } from '../../src/domain/clock.ts';
import { DomainError } from '../../src/domain/errors.ts';
import { BaileysEngine, type BaileysEngineOptions } from '../../src/engines/baileys/index.ts';
import type { EngineSession, EngineSessionContext } from '../../src/engines/engine.ts';
import { SqlSessionLocks } from '../../src/sessions/instance-lock.ts';
import { type FakeSocket, fakeFactory, storePairedCreds } from './fake-socket.ts';
import {
  type LiveFixture,
  liveFixture,
  type RecordingContext,
  recordingContext,
  silentLogger,
} from './support.ts';

/** What {@link FakeSessions.setup} may change about a session. */
export interface FakeSessionOptions {
  /** Whether the instance's stored credentials are paired already (default true). */
  paired?: boolean;
  /** What each socket the session opens does first (default: it opens at once); `i` counts the sockets from 0. */
  open?: (sock: FakeSocket, i: number) => void;
  /** Engine options over the defaults (a 50 ms ack timeout, jitter fixed at 0.5). */
  engine?: Partial<BaileysEngineOptions>;
  /** The session's clock (default: fixed at 2030-01-01T00:00:00Z). */
  clock?: Clock;
  /**
   * Parts of the session's context to replace (its logger, its `findMessage`, its reads of the kept LID pairs),
   * before the session is made.
   */
  context?: Partial<Pick<EngineSessionContext, 'logger' | 'findMessage' | 'keptLidPhone' | 'keptLidPhones'>>;
}

/** A live session over fake sockets, with what a test reads of it. */
export interface FakeSession {
  session: EngineSession;
  fake: ReturnType<typeof fakeFactory>;
  rc: RecordingContext;
  /** The last socket the session opened; fails when none was. */
  sock: () => FakeSocket;
}

/**
 * Live (Baileys) sessions over fake sockets (./fake-socket.ts), each on the next instance of `fixture` with its own
 * engine and a clock fixed at 2030-01-01: a test file makes one, calls {@link setup} per test and {@link close} after
 * them all.
 */
export class FakeSessions {
  readonly #fixture: LiveFixture;
  readonly #engines: BaileysEngine[] = [];
  #next = 0;

  /** Sessions on `fixture`'s instances, one instance each. */
  constructor(fixture: LiveFixture) {
    this.#fixture = fixture;
  }

  /**
   * A session of the next instance, created but not connected.
   * @throws when `fixture` has no instance left.
   */
  async setup(options: FakeSessionOptions = {}): Promise<FakeSession> {
    const instanceId = this.#fixture.instanceIds[this.#next++];
    assert.ok(instanceId, 'the fixture has an instance left');
    const fake = fakeFactory(options.open ?? ((sock) => sock.open()));
    const engine = new BaileysEngine({
      locks: new SqlSessionLocks({ db: this.#fixture.test.store.db, owner: 'p' }),
      logger: silentLogger(),
      socketFactory: fake.factory,
      ackTimeoutMs: 50,
      random: () => 0.5,
      ...options.engine,
    });
    this.#engines.push(engine);
    const rc = recordingContext(
      this.#fixture,
      instanceId,
      options.clock ?? (() => Date.parse('2030-01-01T00:00:00Z')),
    );
    Object.assign(rc.context, options.context);
    if (options.paired ?? true) await storePairedCreds(rc.context.auth);
    const session = engine.createSession(rc.context);
    const sock = () => {
      const last = fake.sockets.at(-1);
      assert.ok(last, 'a socket exists');
      return last;
    };
    return { session, fake, rc, sock };
  }

  /** Closes every engine {@link setup} made. */
  async close(): Promise<void> {
    await Promise.all(this.#engines.map((engine) => engine.close()));
  }
}

/** An `assert.rejects` check: the error is a {@link DomainError} of `code`, its message matching `message` if given. */
export function isDomainError(code: DomainError['code'], message?: RegExp) {
  return (error: unknown) => {
    assert.ok(error instanceof DomainError, String(error));
    assert.equal(error.code, code);
    if (message) assert.match(error.message, message);
    return true;
  };
}

/**
 * For the enclosing `describe`: a SQLite fixture of `count` live instances and {@link FakeSessions} on it, made
 * before its first test and dropped after its last. → a session of the next instance per call (see
 * {@link FakeSessions.setup}).
 */
export function fakeSessionsPerSuite(count = 16): (options?: FakeSessionOptions) => Promise<FakeSession> {
  let fixture: LiveFixture | undefined;
  let sessions: FakeSessions | undefined;
  before(async () => {
    fixture = await liveFixture('sqlite', count);
    sessions = new FakeSessions(fixture);
  });
  after(async () => {
    await sessions?.close();
    await fixture?.test.cleanup();
  });
  return (options) => {
    if (!sessions) throw new Error('no sessions outside the suite');
    return sessions.setup(options);
  };
}
