import { errors } from '../../domain/errors.ts';
import type { ConnectionState, EngineEvent, PairingCode } from '../../domain/messages.ts';
import { USER_DOMAIN } from '../../domain/messages.ts';
import type { EngineSessionContext } from '../engine.ts';
import type { SandboxCredentials } from './account.ts';
import { defaultSandboxPhone, pairingSlot, sandboxPairingCode } from './pairing.ts';
import { savedName } from './profile.ts';

/** Where the instance's credentials are kept in its auth port: category `creds`, id `self`. */
const CREDS = { category: 'creds', id: 'self' } as const;

type Phase = { kind: 'idle' } | { kind: 'pairing'; startedAt: number; attempt: number } | { kind: 'open' };

/**
 * The session lifecycle of one sandbox instance (docs/api.md#session, docs/decisions/0016-session-lifecycle.md,
 * docs/decisions/0004-sandbox.md): the connection phase (idle, pairing, open), the pairing attempts and their QR
 * codes (pairing.ts), the stored credentials (auth category `creds`, id `self`, read once and then kept) and the
 * callers waiting for a login. The pairing attempt's expiry is computed from the clock when read, so an idle
 * sandbox instance holds no timer. The session (session.ts) delegates its lifecycle calls here and asks
 * {@link ready} before every platform operation.
 */
export class SandboxLifecycle {
  readonly #context: EngineSessionContext;
  #phase: Phase = { kind: 'idle' };
  #attempts = 0;
  /** Counts the disconnects, logouts and closes: a connect that waited across one of them does not go on. */
  #generation = 0;
  #creds: SandboxCredentials | null = null;
  #credsLoaded = false;
  #loginWaiters: (() => void)[] = [];

  /** `context` is the session's, its auth port the one keeping the session's own categories (owned-state.ts). */
  constructor(context: EngineSessionContext) {
    this.#context = context;
  }

  /**
   * Opens the connection: with stored credentials the account is logged in at once, else a new pairing attempt
   * starts; either way a `connection` event is emitted. Does nothing unless idle. A connection whose event is not
   * recorded is closed again (the sandbox's relay is its recording, docs/decisions/0024-engines-and-data-flow.md),
   * so the connect made again opens it and reports it (left open, it did nothing).
   * @throws the recording's error.
   */
  async connect(): Promise<void> {
    this.#expirePairing();
    if (this.#phase.kind !== 'idle') return;
    const generation = this.#generation;
    const creds = await this.#loadCreds();
    // A disconnect, logout or close while the credentials were read ends this attempt: it never opens after them.
    if (generation !== this.#generation || this.#phase.kind !== 'idle') return;
    if (creds) {
      await this.#enter({ kind: 'open' });
      this.#wakeLoginWaiters();
      return;
    }
    this.#attempts += 1;
    await this.#enter({ kind: 'pairing', startedAt: this.#context.clock(), attempt: this.#attempts });
  }

  /** Enters `phase` from idle and records its `connection` event; idle again when that fails. @throws its error. */
  async #enter(phase: Phase): Promise<void> {
    this.#phase = phase;
    try {
      await this.#context.emit({ type: 'connection', state: this.state() });
    } catch (error) {
      if (this.#phase === phase) this.#phase = { kind: 'idle' };
      throw error;
    }
  }

  /** True once logged in and connected, or the same check after `timeoutMs` milliseconds (or at close). */
  waitForLogin(timeoutMs: number): Promise<boolean> {
    if (this.#isReady()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        resolve(this.#isReady());
      };
      const timer = setTimeout(() => {
        this.#loginWaiters = this.#loginWaiters.filter((w) => w !== done);
        resolve(this.#isReady());
      }, timeoutMs);
      this.#loginWaiters.push(done);
    });
  }

  /** The current state, from the credentials already read (an expired pairing attempt ends first). */
  state(): ConnectionState {
    this.#expirePairing();
    const creds = this.#creds;
    return {
      connected: this.#phase.kind !== 'idle',
      loggedIn: creds !== null,
      jid: creds?.jid ?? null,
      phone: creds?.phone ?? null,
      pushName: creds?.pushName ?? null,
    };
  }

  /**
   * The current QR code of the pairing attempt (pairing.ts; `expiresAt` epoch ms), or null when none runs; an
   * attempt whose last code expired ends here (the phase goes back to idle).
   */
  pairingCode(): PairingCode | null {
    const phase = this.#phase;
    if (phase.kind !== 'pairing') return null;
    const slot = pairingSlot(phase.startedAt, this.#context.clock());
    if (!slot) {
      this.#phase = { kind: 'idle' };
      return null;
    }
    return {
      code: sandboxPairingCode(this.#context.instanceId, phase.attempt, slot.index),
      expiresAt: slot.expiresAt,
    };
  }

  /** Goes idle and keeps the credentials; emits a `connection` event. */
  async disconnect(): Promise<void> {
    this.#generation += 1;
    await this.#loadCreds();
    this.#phase = { kind: 'idle' };
    await this.#context.emit({ type: 'connection', state: this.state() });
  }

  /** Deletes the stored credentials and goes idle; emits a `connection` event. The simulated world stays. */
  async logout(): Promise<void> {
    this.#generation += 1;
    await this.#context.auth.set([{ ...CREDS, value: null }]);
    this.#creds = null;
    this.#credsLoaded = true;
    this.#phase = { kind: 'idle' };
    await this.#context.emit({ type: 'connection', state: this.state() });
  }

  /** Goes idle without an event and wakes the callers waiting for a login (they resolve false). */
  close(): void {
    this.#generation += 1;
    this.#phase = { kind: 'idle' };
    this.#wakeLoginWaiters();
  }

  /**
   * The credentials of the logged-in, connected account.
   * @throws DomainError not_logged_in before login, not_connected when logged in but not connected (409,
   *   docs/decisions/0001-envelope-and-error-codes.md).
   */
  async ready(): Promise<SandboxCredentials> {
    const creds = await this.#loadCreds();
    if (!creds) throw errors.notLoggedIn();
    this.#expirePairing();
    if (this.#phase.kind !== 'open') throw errors.notConnected();
    return creds;
  }

  /**
   * The owner scans the current QR code (docs/decisions/0004-sandbox.md, `POST /v1/sandbox/scan`): the account logs
   * in as `input.phone` (default: pairing.ts `defaultSandboxPhone`), with the name it last set or
   * `Sandbox <last 4 digits>` as its push name. Its credentials are written in the transaction that records its
   * `connection` event, an empty `INITIAL_BOOTSTRAP` history event and the events `linked` returns for the phone
   * (the session replays the account's labels), so the login is kept with all of them or not at all
   * (docs/decisions/0077-state-with-its-events.md); the login waiters wake once it is. A login not recorded is
   * undone: the pairing attempt goes on, and the code scanned again logs in and records it all.
   * @throws DomainError conflict `already logged in` when logged in, not_connected when no pairing attempt runs;
   *   invalid `code does not match the current QR code` when `input.code` is given and not the current code; the
   *   recording's or the store's error.
   */
  async scan(
    input: { code?: string; phone?: string },
    linked: (phone: string) => Promise<EngineEvent[]>,
  ): Promise<ConnectionState> {
    const current = this.pairingCode();
    if (!current) {
      await this.#loadCreds();
      throw this.#creds ? errors.alreadyLoggedIn() : errors.notConnected();
    }
    if (input.code !== undefined && input.code !== current.code) {
      throw errors.badRequest('code does not match the current QR code');
    }
    const phone = input.phone ?? defaultSandboxPhone(this.#context.instanceId);
    const creds: SandboxCredentials = {
      phone,
      jid: `${phone}.0:1@${USER_DOMAIN}`,
      pushName: (await savedName(this.#context.auth, phone)) ?? `Sandbox ${phone.slice(-4)}`,
    };
    const replay = await linked(phone);
    const pairing = this.#phase;
    this.#creds = creds;
    this.#credsLoaded = true;
    this.#phase = { kind: 'open' };
    const state = this.state();
    try {
      await this.#context.emitWith(
        [{ ...CREDS, value: JSON.stringify(creds) }],
        [
          { type: 'connection', state },
          { type: 'history', syncType: 'INITIAL_BOOTSTRAP', progress: 100, chats: [] },
          ...replay,
        ],
      );
    } catch (error) {
      // The sandbox's relay is its recording (docs/decisions/0024-engines-and-data-flow.md): a login whose events
      // were not recorded is undone (nothing of it was written), so the same code scanned again logs in and reports
      // it (kept, the scan made again was refused as already logged in, and the labels never replayed).
      if (this.#creds === creds) this.#creds = null;
      if (this.#phase.kind === 'open') this.#phase = pairing;
      throw error;
    }
    this.#wakeLoginWaiters();
    return state;
  }

  /**
   * Makes `name` the push name of the stored credentials (the session status shows it) when the account is
   * logged in under another one; nothing otherwise.
   */
  async rename(name: string): Promise<void> {
    const creds = this.#creds;
    if (creds && creds.pushName !== name) {
      const next = { ...creds, pushName: name };
      await this.#context.auth.set([{ ...CREDS, value: JSON.stringify(next) }]);
      this.#creds = next;
    }
  }

  #isReady(): boolean {
    return this.#phase.kind === 'open' && this.#creds !== null;
  }

  #wakeLoginWaiters(): void {
    const waiters = this.#loginWaiters;
    this.#loginWaiters = [];
    for (const wake of waiters) wake();
  }

  #expirePairing(): void {
    if (this.#phase.kind === 'pairing') this.pairingCode();
  }

  /**
   * The stored credentials, read once. A login or logout that set them while the read was under way keeps what it
   * set: the read began before it, so what it found is older.
   */
  async #loadCreds(): Promise<SandboxCredentials | null> {
    if (this.#credsLoaded) return this.#creds;
    const stored = (await this.#context.auth.get(CREDS.category, [CREDS.id])).get(CREDS.id);
    if (!this.#credsLoaded) {
      this.#creds = stored === undefined ? null : (JSON.parse(stored) as SandboxCredentials);
      this.#credsLoaded = true;
    }
    return this.#creds;
  }
}
