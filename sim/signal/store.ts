/**
 * The in-memory Signal store of one simulated device: the storage interface libsignal's SessionBuilder and
 * SessionCipher call (libsignal-node src/session_builder.js, src/session_cipher.js), holding sessions,
 * remote identities, one-time pre-keys and signed pre-keys.
 *
 * Sessions are kept serialized and deserialized on every load, as Baileys' key store does: a decryption that
 * fails half-way (bad MAC, replayed counter) leaves the stored session untouched, because libsignal stores
 * the record only after success.
 *
 * Identities are trusted on first use and replaced when a peer's pkmsg carries another one, the session
 * being dropped then (Baileys lib/Signal/libsignal.js signalStorage.saveIdentity, the way WhatsApp Web
 * behaves: an identity change re-establishes the session and shows a security notice).
 */
import { SessionRecord, type SignalStorage } from 'libsignal';

/** A curve25519 key pair as libsignal holds it: `pubKey` 33 bytes (0x05 + key), `privKey` 32 bytes. */
export interface SignalKeyPair {
  pubKey: Buffer;
  privKey: Buffer;
}

/** What {@link MemorySignalStore} needs to know about its own device. */
export interface OwnKeys {
  registrationId: number;
  identity: SignalKeyPair;
}

/** The serialized form of a libsignal SessionRecord (plain data: base64 strings, numbers). */
type SerializedSession = ReturnType<SessionRecord['serialize']>;

/**
 * Everything a {@link MemorySignalStore} holds, as plain data (Maps, Buffers, numbers, strings): what the
 * simulator's state file keeps across restarts (sim/model/state.ts). Not a copy: serialize it before the store
 * changes again.
 */
export interface SignalStoreState {
  sessions: Map<string, SerializedSession>;
  identities: Map<string, Buffer>;
  preKeys: Map<number, SignalKeyPair>;
  signedPreKeys: Map<number, SignalKeyPair>;
  currentSignedPreKey: number | undefined;
}

/** One device's libsignal storage, in memory. */
export class MemorySignalStore implements SignalStorage {
  private readonly sessions = new Map<string, SerializedSession>();
  private readonly identities = new Map<string, Buffer>();
  private readonly preKeys = new Map<number, SignalKeyPair>();
  private readonly signedPreKeys = new Map<number, SignalKeyPair>();
  private currentSignedPreKey: number | undefined;

  constructor(private readonly own: OwnKeys) {}

  /** The store's content as plain data (see {@link SignalStoreState}). */
  exportState(): SignalStoreState {
    return {
      sessions: this.sessions,
      identities: this.identities,
      preKeys: this.preKeys,
      signedPreKeys: this.signedPreKeys,
      currentSignedPreKey: this.currentSignedPreKey,
    };
  }

  /** Replaces the store's content with `state` (as {@link exportState} gave it, read back from a file). */
  restoreState(state: SignalStoreState): void {
    for (const [target, source] of [
      [this.sessions, state.sessions],
      [this.identities, state.identities],
      [this.preKeys, state.preKeys],
      [this.signedPreKeys, state.signedPreKeys],
    ] as const) {
      target.clear();
      for (const [key, value] of source as Map<never, never>) (target as Map<never, never>).set(key, value);
    }
    this.currentSignedPreKey = state.currentSignedPreKey;
  }

  /** Keeps a one-time pre-key pair (private part) until a pkmsg uses it. */
  addPreKey(id: number, pair: SignalKeyPair): void {
    this.preKeys.set(id, pair);
  }

  /** Keeps a signed pre-key pair and makes it the current one (older ones still open pkmsgs built on them). */
  addSignedPreKey(id: number, pair: SignalKeyPair): void {
    this.signedPreKeys.set(id, pair);
    this.currentSignedPreKey = id;
  }

  /** How many one-time pre-keys are still unused. */
  preKeyCount(): number {
    return this.preKeys.size;
  }

  async loadSession(address: string): Promise<SessionRecord | undefined> {
    const stored = this.sessions.get(address);
    return stored === undefined ? undefined : SessionRecord.deserialize(structuredClone(stored));
  }

  async storeSession(address: string, record: SessionRecord): Promise<void> {
    this.sessions.set(address, structuredClone(record.serialize()));
  }

  /** True when an open (usable for sending) session with `address` exists. */
  async hasOpenSession(address: string): Promise<boolean> {
    return (await this.loadSession(address))?.haveOpenSession() ?? false;
  }

  /** Forgets the session with `address` (the next message to it needs a fresh bundle). */
  deleteSession(address: string): void {
    this.sessions.delete(address);
  }

  /** Trust on first use, as Baileys and WhatsApp Web: identity changes are handled by {@link saveIdentity}. */
  isTrustedIdentity(): boolean {
    return true;
  }

  /**
   * Records `address`'s identity key (33 bytes); when it differs from the one recorded, drops the session
   * with that address. Returns true when the key is new or changed.
   */
  saveIdentity(address: string, identityKey: Uint8Array): boolean {
    const known = this.identities.get(address);
    if (known?.equals(identityKey)) return false;
    if (known) this.sessions.delete(address);
    this.identities.set(address, Buffer.from(identityKey));
    return true;
  }

  /** The identity key (33 bytes) recorded for `address`, if any. */
  identityOf(address: string): Buffer | undefined {
    return this.identities.get(address);
  }

  async loadPreKey(id: number | string): Promise<SignalKeyPair | undefined> {
    return this.preKeys.get(Number(id));
  }

  removePreKey(id: number): void {
    this.preKeys.delete(id);
  }

  /** The signed pre-key with `id`, or the current one when no id is given. */
  loadSignedPreKey(id?: number): SignalKeyPair {
    const key = this.signedPreKeys.get(id ?? this.currentSignedPreKey ?? -1);
    if (!key) throw new Error(`no signed pre-key ${id ?? '(current)'}`);
    return key;
  }

  getOurRegistrationId(): number {
    return this.own.registrationId;
  }

  getOurIdentity(): SignalKeyPair {
    return this.own.identity;
  }
}
