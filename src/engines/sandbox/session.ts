import { ApiError, errors } from '../../errors.ts';
import type { EngineSession, EngineSessionContext, SandboxControls } from '../engine.ts';
import type {
  Avatar,
  ConnectionState,
  Contact,
  GroupInfo,
  Jid,
  OutgoingMessage,
  PairingCode,
  SentMessage,
  UserCheck,
  UserInfo,
} from '../types.ts';
import { USER_DOMAIN } from '../types.ts';
import { defaultSandboxPhone, pairingSlot, sandboxPairingCode } from './pairing.ts';

/** What the sandbox stores as an instance's credentials (auth category `creds`, id `self`). */
export interface SandboxCredentials {
  phone: string;
  jid: Jid;
  pushName: string;
}

const CREDS = { category: 'creds', id: 'self' } as const;

type Phase = { kind: 'idle' } | { kind: 'pairing'; startedAt: number; attempt: number } | { kind: 'open' };

/**
 * One instance on the simulated platform (DESIGN D9). Session lifecycle per SPEC States and DESIGN D7; the
 * pairing attempt's expiry is computed from the clock when read, so an idle sandbox instance holds no timer.
 */
export class SandboxSession implements EngineSession {
  readonly #context: EngineSessionContext;
  #phase: Phase = { kind: 'idle' };
  #attempts = 0;
  #creds: SandboxCredentials | null = null;
  #credsLoaded = false;
  #loginWaiters: (() => void)[] = [];
  readonly sandbox: SandboxControls;

  constructor(context: EngineSessionContext) {
    this.#context = context;
    this.sandbox = { scan: (input) => this.#scan(input) };
  }

  async connect(): Promise<void> {
    this.#expirePairing();
    if (this.#phase.kind !== 'idle') return;
    const creds = await this.#loadCreds();
    if (creds) {
      this.#phase = { kind: 'open' };
      await this.#context.emit({ type: 'connection', state: this.state() });
      this.#wakeLoginWaiters();
      return;
    }
    this.#attempts += 1;
    this.#phase = { kind: 'pairing', startedAt: this.#context.clock(), attempt: this.#attempts };
    await this.#context.emit({ type: 'connection', state: this.state() });
  }

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

  async disconnect(): Promise<void> {
    await this.#loadCreds();
    this.#phase = { kind: 'idle' };
    await this.#context.emit({ type: 'connection', state: this.state() });
  }

  async logout(): Promise<void> {
    await this.#context.auth.clear();
    this.#creds = null;
    this.#credsLoaded = true;
    this.#phase = { kind: 'idle' };
    await this.#context.emit({ type: 'connection', state: this.state() });
  }

  async close(): Promise<void> {
    this.#phase = { kind: 'idle' };
    this.#wakeLoginWaiters();
  }

  send(_message: OutgoingMessage): Promise<SentMessage> {
    return this.#notYet();
  }
  react(_chat: Jid, _targetId: string, _fromMe: boolean, _emoji: string): Promise<SentMessage> {
    return this.#notYet();
  }
  markRead(_chat: Jid, _ids: readonly string[], _sender?: Jid): Promise<void> {
    return this.#notYet();
  }
  checkPhones(_phones: readonly string[]): Promise<UserCheck[]> {
    return this.#notYet();
  }
  userInfo(_phones: readonly string[]): Promise<UserInfo[]> {
    return this.#notYet();
  }
  avatar(_phone: string): Promise<Avatar | null> {
    return this.#notYet();
  }
  contacts(): Promise<Contact[]> {
    return this.#notYet();
  }
  createGroup(_name: string, _participants: readonly Jid[]): Promise<GroupInfo> {
    return this.#notYet();
  }
  listGroups(): Promise<GroupInfo[]> {
    return this.#notYet();
  }
  groupInfo(_jid: Jid): Promise<GroupInfo> {
    return this.#notYet();
  }
  groupInviteCode(_jid: Jid): Promise<string> {
    return this.#notYet();
  }

  #notYet<T>(): Promise<T> {
    return Promise.reject(new ApiError('PLATFORM_ERROR', 'the sandbox does not simulate this operation yet'));
  }

  async #scan(input: { code?: string; phone?: string }): Promise<ConnectionState> {
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
      pushName: `Sandbox ${phone.slice(-4)}`,
    };
    await this.#context.auth.set([{ ...CREDS, value: JSON.stringify(creds) }]);
    this.#creds = creds;
    this.#credsLoaded = true;
    this.#phase = { kind: 'open' };
    const state = this.state();
    await this.#context.emit({ type: 'connection', state });
    await this.#context.emit({ type: 'history', syncType: 'INITIAL_BOOTSTRAP', progress: 100, chats: [] });
    this.#wakeLoginWaiters();
    return state;
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

  async #loadCreds(): Promise<SandboxCredentials | null> {
    if (this.#credsLoaded) return this.#creds;
    const stored = (await this.#context.auth.get(CREDS.category, [CREDS.id])).get(CREDS.id);
    this.#creds = stored === undefined ? null : (JSON.parse(stored) as SandboxCredentials);
    this.#credsLoaded = true;
    return this.#creds;
  }
}
