/**
 * A simulated device's Signal side: its registration id, identity key pair, signed pre-key and one-time
 * pre-keys, its libsignal store, and encryption to / decryption from the devices it talks to — the Signal
 * protocol (X3DH + Double Ratchet) as libsignal-node runs it, the library Baileys 7 uses
 * (lib/Signal/libsignal.js). Used for simulated users' phones (device 0) and any simulated companion.
 *
 * Sessions are keyed by the peer's Signal address, LID-preferred like Baileys (see address.ts).
 */
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type { proto } from 'baileys';
import { SessionBuilder, SessionCipher } from 'libsignal';
import * as curve from 'libsignal/src/curve.js';
import { type LidLookup, sessionAddress } from './address.ts';
import { SignalError } from './errors.ts';
import { type DeviceKeys, KEY_TYPE_DJB, type KeyBundle } from './keys.ts';
import { type DecodedMessage, decodeMessage, encodeMessage } from './payload.ts';
import { type SenderKeyState, SenderKeys } from './sender-keys.ts';
import { MemorySignalStore, type SignalKeyPair, type SignalStoreState } from './store.ts';

export { SignalError };

const require = createRequire(import.meta.url);
/** libsignal's PreKeyWhisperMessage protobuf, read for the sender's identity key as Baileys does. */
const { PreKeyWhisperMessage } = require('libsignal/src/protobufs.js') as {
  PreKeyWhisperMessage: { decode(bytes: Uint8Array): { identityKey?: Uint8Array | null } };
};

/**
 * A Signal message on the wire: `pkmsg` (PreKeyWhisperMessage, libsignal type 3: opens a session with a
 * fetched bundle) or `msg` (WhisperMessage, type 1: within an established session) — the `type` attribute
 * of `<enc v="2">`.
 */
export interface Ciphertext {
  type: 'pkmsg' | 'msg';
  ciphertext: Buffer;
}

/** A {@link Ciphertext} to decrypt; the bytes may be any Uint8Array (the binary decoder gives Buffers). */
export interface CiphertextInput {
  type: Ciphertext['type'];
  ciphertext: Uint8Array;
}

/** How to create a {@link SimDevice}. */
export interface SimDeviceOptions {
  /** The device's JID by phone number: `<phone>@s.whatsapp.net` for the phone, `<phone>:<n>@…` for others. */
  jid: string;
  /** The device's JID by LID (`<lid>[:<n>]@lid`), when the account has one. */
  lid?: string;
  /** One-time pre-keys to generate now (default 100; the platform keeps a stock per device). */
  preKeys?: number;
  /** Maps a peer's phone number to its LID user, so sessions are stored under LID addresses (address.ts). */
  lidOf?: LidLookup;
  /**
   * A state {@link SimDevice.exportState} gave before (read back from the simulator's state file): the device
   * keeps its keys, sessions and sender keys instead of generating new ones (`preKeys` is then ignored).
   */
  state?: SimDeviceState;
}

/**
 * Everything a {@link SimDevice} holds, as plain data (Maps, Buffers, numbers): its registration id, identity,
 * published keys, the next pre-key id, its libsignal store and its sender keys. Not a copy.
 */
export interface SimDeviceState {
  registrationId: number;
  identity: SignalKeyPair;
  keys: DeviceKeys;
  nextPreKeyId: number;
  store: SignalStoreState;
  senderKeys: Map<string, SenderKeyState>;
}

/** libsignal's key pair as Buffers (its curve returns Buffers; its typings say Uint8Array). */
function keyPair(): SignalKeyPair {
  const pair = curve.generateKeyPair();
  return { pubKey: Buffer.from(pair.pubKey), privKey: Buffer.from(pair.privKey) };
}

/** A 14-bit non-zero registration id (libsignal keyhelper.generateRegistrationId, which may yield 0). */
function registrationId(): number {
  return randomBytes(2).readUInt16BE(0) & 0x3fff || 1;
}

/** Drops libsignal's 0x05 type byte: the 32-byte form the platform publishes. */
function wireKey(pubKey: Buffer): Buffer {
  return pubKey.subarray(1);
}

/** Adds libsignal's 0x05 type byte to a 32-byte wire key. */
function signalKey(key: Buffer): Buffer {
  return key.length === 33 ? key : Buffer.concat([Buffer.from([KEY_TYPE_DJB]), key]);
}

/** One simulated device with real Signal keys and sessions. */
export class SimDevice {
  readonly jid: string;
  readonly lid: string | undefined;
  readonly registrationId: number;
  /** Identity key pair, libsignal form (pubKey 33 bytes). */
  readonly identity: SignalKeyPair;
  /**
   * The public keys this device publishes, in the platform's wire form: what a key fetch hands out. The
   * server consumes one-time pre-keys from `keys.preKeys` (keys.ts takeBundle); the private halves stay here
   * until a pkmsg uses them.
   */
  readonly keys: DeviceKeys;
  private readonly store: MemorySignalStore;
  private readonly senderKeys: SenderKeys;
  private readonly lidOf: LidLookup | undefined;
  private nextPreKeyId = 1;

  constructor(options: SimDeviceOptions) {
    this.jid = options.jid;
    this.lid = options.lid;
    this.lidOf = options.lidOf;
    const state = options.state;
    this.registrationId = state?.registrationId ?? registrationId();
    this.identity = state?.identity ?? keyPair();
    this.store = new MemorySignalStore({ registrationId: this.registrationId, identity: this.identity });
    this.senderKeys = new SenderKeys(this.addressOf(this.lid ?? this.jid));
    if (state) {
      this.store.restoreState(state.store);
      this.senderKeys.restoreState(state.senderKeys);
      this.keys = state.keys;
      this.nextPreKeyId = state.nextPreKeyId;
      return;
    }
    const signed = keyPair();
    const signedId = 1;
    this.store.addSignedPreKey(signedId, signed);
    // XEdDSA signature over the 33-byte public key, as libsignal keyhelper.generateSignedPreKey and Baileys
    // signedKeyPair compute it; libsignal's SessionBuilder.initOutgoing verifies exactly this.
    const signature = Buffer.from(curve.calculateSignature(this.identity.privKey, signed.pubKey));
    this.keys = {
      registrationId: this.registrationId,
      identity: wireKey(this.identity.pubKey),
      signedPreKey: { id: signedId, public: wireKey(signed.pubKey), signature },
      preKeys: new Map(),
    };
    this.addPreKeys(options.preKeys ?? 100);
  }

  /** The device's whole state as plain data, for the simulator's state file (see {@link SimDeviceState}). */
  exportState(): SimDeviceState {
    return {
      registrationId: this.registrationId,
      identity: this.identity,
      keys: this.keys,
      nextPreKeyId: this.nextPreKeyId,
      store: this.store.exportState(),
      senderKeys: this.senderKeys.exportState(),
    };
  }

  /**
   * Generates `count` more one-time pre-keys, adds their public halves to {@link keys}.preKeys and returns
   * them (id → 32-byte public key). Ids increase from 1 and wrap below 2^24 as libsignal's key ids do.
   */
  addPreKeys(count: number): Map<number, Buffer> {
    const added = new Map<number, Buffer>();
    for (let i = 0; i < count; i++) {
      const id = this.nextPreKeyId;
      this.nextPreKeyId = (this.nextPreKeyId % 0xffffff) + 1;
      const pair = keyPair();
      this.store.addPreKey(id, pair);
      added.set(id, wireKey(pair.pubKey));
      this.keys.preKeys.set(id, wireKey(pair.pubKey));
    }
    return added;
  }

  /** Unused one-time pre-keys held privately (handed out or not). */
  preKeyCount(): number {
    return this.store.preKeyCount();
  }

  /** The Signal address (`user[_domain].device`) the session with `peer` (a device JID) is stored under. */
  addressOf(peer: string): string {
    return sessionAddress(peer, this.lidOf).toString();
  }

  /** True when a session able to encrypt to `peer` exists. */
  hasSession(peer: string): Promise<boolean> {
    return this.store.hasOpenSession(this.addressOf(peer));
  }

  /** The identity key (32 bytes, wire form) recorded for `peer`, if any. */
  identityOf(peer: string): Buffer | undefined {
    const key = this.store.identityOf(this.addressOf(peer));
    return key ? wireKey(key) : undefined;
  }

  /** Forgets the session with `peer` (the platform's "identity changed / re-register" path). */
  deleteSession(peer: string): void {
    this.store.deleteSession(this.addressOf(peer));
  }

  /**
   * Opens a session to `peer` from its fetched bundle (X3DH initiator, libsignal SessionBuilder.initOutgoing,
   * as Baileys' injectE2ESession): the next {@link encrypt} to it is a `pkmsg`.
   * Stricter than libsignal-node, whose initOutgoing skips the check (curve.verifySignature with isInit):
   * the signed pre-key's XEdDSA signature must verify against the bundle's identity key, as the Signal
   * specification (X3DH section 3.3) requires.
   * @throws SignalError when the signature does not verify.
   */
  async startSession(peer: string, bundle: KeyBundle): Promise<void> {
    const address = sessionAddress(peer, this.lidOf);
    const identityKey = signalKey(bundle.identity);
    if (
      !curve.verifySignature(
        identityKey,
        signalKey(bundle.signedPreKey.public),
        bundle.signedPreKey.signature,
      )
    ) {
      throw new SignalError(`bundle of ${peer} rejected: signed pre-key not signed by its identity key`);
    }
    this.store.saveIdentity(address.toString(), identityKey);
    type OutgoingSession = Parameters<SessionBuilder['initOutgoing']>[0];
    const session: Omit<OutgoingSession, 'preKey'> & { preKey?: OutgoingSession['preKey'] } = {
      registrationId: bundle.registrationId,
      identityKey,
      signedPreKey: {
        keyId: bundle.signedPreKey.id,
        publicKey: signalKey(bundle.signedPreKey.public),
        signature: bundle.signedPreKey.signature,
      },
    };
    if (bundle.preKey)
      session.preKey = { keyId: bundle.preKey.id, publicKey: signalKey(bundle.preKey.public) };
    try {
      // libsignal's typings mark preKey required; initOutgoing runs X3DH without it when absent
      // (session_builder.js `device.preKey && …`), as the platform allows once one-time pre-keys run out.
      await new SessionBuilder(this.store, address).initOutgoing(session as OutgoingSession);
    } catch (error) {
      throw new SignalError(`bundle of ${peer} rejected: ${(error as Error).message}`, { cause: error });
    }
  }

  /**
   * Encrypts `plaintext` (already padded) to `peer`: `pkmsg` until the peer has answered on this session,
   * `msg` after (libsignal SessionCipher.encrypt; Baileys' repository.encryptMessage).
   * @throws SignalError when there is no session with `peer` ({@link startSession} first).
   */
  async encrypt(peer: string, plaintext: Uint8Array): Promise<Ciphertext> {
    const address = sessionAddress(peer, this.lidOf);
    if (!(await this.store.hasOpenSession(address.toString()))) {
      throw new SignalError(`no session with ${peer} (${address.toString()}): fetch its bundle first`);
    }
    const { type, body } = await new SessionCipher(this.store, address).encrypt(Buffer.from(plaintext));
    return { type: type === 3 ? 'pkmsg' : 'msg', ciphertext: Buffer.from(body, 'binary') };
  }

  /**
   * Decrypts a `pkmsg` or `msg` from `peer` (libsignal SessionCipher; Baileys' repository.decryptMessage):
   * a pkmsg records the sender's identity (a changed identity drops the old session first) and consumes the
   * one-time pre-key it names. Returns the plaintext, still padded, and whether the identity was new or changed.
   * @throws SignalError when the message does not decrypt (wrong identity or keys, no session, replay).
   */
  async decrypt(
    peer: string,
    input: CiphertextInput,
  ): Promise<{ plaintext: Buffer; identityChanged: boolean }> {
    const ciphertext = Buffer.from(input.ciphertext);
    const address = sessionAddress(peer, this.lidOf);
    const cipher = new SessionCipher(this.store, address);
    let identityChanged = false;
    try {
      if (input.type === 'pkmsg') {
        const identity = PreKeyWhisperMessage.decode(ciphertext.subarray(1)).identityKey;
        if (identity?.length === 33) identityChanged = this.store.saveIdentity(address.toString(), identity);
        return { plaintext: await cipher.decryptPreKeyWhisperMessage(ciphertext), identityChanged };
      }
      return { plaintext: await cipher.decryptWhisperMessage(ciphertext), identityChanged };
    } catch (error) {
      throw new SignalError(`cannot decrypt ${input.type} from ${peer}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  /** Encodes `message` as the platform does (protobuf + padding, payload.ts) and encrypts it to `peer`. */
  encryptMessage(peer: string, message: proto.IMessage): Promise<Ciphertext> {
    return this.encrypt(peer, encodeMessage(message));
  }

  /**
   * Decrypts and decodes a `Message` from `peer`, unwrapping `deviceSentMessage` (payload.ts). A message
   * carrying a `senderKeyDistributionMessage` stores `peer`'s sender key for that group (`senderKeyGroup`),
   * as Baileys' decryptMessageNode does.
   * @throws SignalError as {@link decrypt} or for a malformed distribution; PayloadError for bad padding or
   *   protobuf.
   */
  async decryptMessage(
    peer: string,
    input: CiphertextInput,
  ): Promise<DecodedMessage & { identityChanged: boolean; senderKeyGroup?: string }> {
    const { plaintext, identityChanged } = await this.decrypt(peer, input);
    const decoded = decodeMessage(plaintext);
    const skdm = decoded.message.senderKeyDistributionMessage;
    if (skdm?.groupId && skdm.axolotlSenderKeyDistributionMessage) {
      this.senderKeys.process(skdm.groupId, this.addressOf(peer), skdm.axolotlSenderKeyDistributionMessage);
      return { ...decoded, identityChanged, senderKeyGroup: skdm.groupId };
    }
    return { ...decoded, identityChanged };
  }

  /**
   * This device's SenderKeyDistributionMessage for `group` (created on first use): send it to every member
   * device inside a 1:1 message, `{ senderKeyDistributionMessage: { groupId, axolotlSenderKeyDistributionMessage } }`.
   */
  senderKeyDistribution(group: string): Buffer {
    return this.senderKeys.distribution(group);
  }

  /**
   * Encrypts `message` for `group` with this device's sender key (sender-keys.ts): `skmsg` is the
   * `<enc type="skmsg">` payload; `distribution` the SKDM as of this message (members that lack the key need
   * it first, in a pkmsg/msg of the same stanza, as Baileys' relayMessage sends it).
   */
  encryptGroupMessage(group: string, message: proto.IMessage): { skmsg: Buffer; distribution: Buffer } {
    const distribution = this.senderKeys.distribution(group);
    return { skmsg: this.senderKeys.encrypt(group, encodeMessage(message)), distribution };
  }

  /**
   * Decrypts and decodes an `skmsg` that `author` (a device JID) sent to `group`, with the sender key its
   * distribution gave us.
   * @throws SignalError when the sender key is missing or the message does not verify or decrypt;
   *   PayloadError for bad padding or protobuf.
   */
  decryptGroupMessage(group: string, author: string, skmsg: Uint8Array): DecodedMessage {
    return decodeMessage(this.senderKeys.decrypt(group, this.addressOf(author), skmsg));
  }

  /** True when this device holds `author`'s sender key for `group`. */
  hasSenderKey(group: string, author: string): boolean {
    return this.senderKeys.has(group, this.addressOf(author));
  }
}
