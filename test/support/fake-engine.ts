import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import pino from 'pino';
import { DomainError } from '../../src/domain/errors.ts';
import type { ConnectionState, PairingCode } from '../../src/domain/messages.ts';
import type { Engine, EngineSession, EngineSessionContext } from '../../src/engines/engine.ts';
import { SecretBox } from '../../src/security/secrets.ts';
import { SessionManager } from '../../src/sessions/manager.ts';
import type { Database } from '../../src/store/schema.ts';

/** How a {@link FakeEngine}'s sessions behave; counters let tests observe calls. */
export interface FakeBehaviour {
  /** Connect attempts that fail with 503 before one succeeds. */
  unreachableTimes: number;
  /** Whether `waitForLogin` ever verifies the login. */
  loginVerifies: boolean;
  connects: number;
}

/**
 * A scriptable live engine for session-manager tests: connect fails with 503 a set number of times, login
 * verification can be made to never succeed, and pairing by code answers a fixed code. Not a platform
 * simulation (that is the sandbox): only what the manager's policies need.
 */
export class FakeEngine implements Engine {
  readonly name = 'baileys' as const;
  readonly behaviour: FakeBehaviour;

  constructor(behaviour: Partial<FakeBehaviour> = {}) {
    this.behaviour = { unreachableTimes: 0, loginVerifies: true, connects: 0, ...behaviour };
  }

  createSession(context: EngineSessionContext): EngineSession {
    const behaviour = this.behaviour;
    let connected = false;
    const state = (): ConnectionState => ({
      connected,
      loggedIn: true,
      jid: '5511999990999:3@s.whatsapp.net',
      phone: '5511999990999',
      pushName: 'Fake',
    });
    const refuse = () =>
      Promise.reject(new DomainError('platform_refused', 'not simulated by the fake engine'));
    return {
      async connect() {
        behaviour.connects += 1;
        if (behaviour.unreachableTimes > 0) {
          behaviour.unreachableTimes -= 1;
          throw new DomainError('platform_unreachable', 'cannot reach the platform: fake outage');
        }
        connected = true;
        await context.emit({ type: 'connection', state: state() });
      },
      waitForLogin: async () => behaviour.loginVerifies && connected,
      state,
      pairingCode: (): PairingCode | null => null,
      messageId: () => refuse(),
      async disconnect() {
        connected = false;
      },
      async logout() {
        connected = false;
      },
      async close() {
        connected = false;
      },
      requestPairingCode: async () => 'FAKE1234',
      send: refuse,
      react: refuse,
      markRead: refuse,
      edit: refuse,
      revoke: refuse,
      sendPresence: refuse,
      checkPhones: refuse,
      userInfo: refuse,
      avatar: refuse,
      contacts: refuse,
      createGroup: refuse,
      listGroups: refuse,
      groupInfo: refuse,
      groupInviteCode: refuse,
      updateParticipants: refuse,
      updateGroup: refuse,
      leaveGroup: refuse,
      joinGroup: refuse,
      revokeGroupInvite: refuse,
    };
  }
}

/**
 * A session manager on `db` (a new sealing key, a silent logger, retries of 1–2 ms) whose sessions are a
 * {@link FakeEngine}'s in both environments, each session's context (its key port and `emit`) pushed to `contexts`
 * as the session is made; `recorder` records what the sessions emit.
 */
export function sessionsWithContexts(
  db: Kysely<Database>,
  recorder: unknown,
): { sessions: SessionManager; contexts: EngineSessionContext[] } {
  const contexts: EngineSessionContext[] = [];
  const fake = new FakeEngine();
  const engine: Engine = {
    name: 'baileys',
    createSession: (context) => {
      contexts.push(context);
      return fake.createSession(context);
    },
  };
  const sessions = new SessionManager({
    db,
    box: new SecretBox(randomBytes(32)),
    engines: { test: engine, live: engine },
    recorder: recorder as never,
    findMessage: async () => undefined,
    logger: pino({ level: 'silent' }),
    clock: Date.now,
    recordRetry: { baseDelayMs: 1, maxDelayMs: 2, random: () => 0.5 },
  });
  return { sessions, contexts };
}
