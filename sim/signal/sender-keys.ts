/**
 * Group messages with Signal sender keys, written from the Signal protocol (libsignal's SenderKey / GroupCipher;
 * Baileys ports it in lib/Signal/Group) rather than reusing Baileys' port, so the simulator checks Baileys
 * against an independent implementation:
 * - a sender holds, per group, a key id (31-bit), a chain key (32 bytes) at an iteration and a signing key pair;
 *   it hands them to every member once as a SenderKeyDistributionMessage (SKDM: version byte 0x33, then the
 *   protobuf `{ id, iteration, chainKey, signingKey (33 bytes) }`), carried inside a 1:1 pkmsg/msg as
 *   `Message.senderKeyDistributionMessage { groupId, axolotlSenderKeyDistributionMessage }`;
 * - message key seed = HMAC-SHA256(chainKey, 0x01), next chain key = HMAC-SHA256(chainKey, 0x02); the seed
 *   expands by HKDF-SHA256 (32 zero bytes of salt, info "WhisperGroup") into iv (16 bytes) and AES-256 key
 *   (32 bytes); the padded plaintext is AES-256-CBC (PKCS#7) encrypted;
 * - a SenderKeyMessage (`<enc type="skmsg">`) is 0x33, the protobuf `{ id, iteration, ciphertext }`, and an
 *   XEdDSA signature (64 bytes) by the signing key over both;
 * - receivers keep skipped message keys (up to 2000 ahead, as libsignal) so out-of-order messages decrypt,
 *   and refuse a reused iteration.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, randomInt } from 'node:crypto';
import { proto } from 'baileys';
import * as curve from 'libsignal/src/curve.js';
import { SignalError } from './errors.ts';

const VERSION = 0x33;
const SIGNATURE_LENGTH = 64;
const MAX_SKIP = 2000;
/** Skipped message keys kept per sender (libsignal SenderKeyState MAX_MESSAGE_KEYS). */
const MAX_SKIPPED_KEYS = 2000;

export interface ChainKey {
  iteration: number;
  key: Buffer;
}

/** One sender's key state in one group. `signingPrivate` only for our own. */
export interface SenderKeyState {
  keyId: number;
  chain: ChainKey;
  signingPublic: Buffer;
  signingPrivate?: Buffer;
  skipped: Map<number, Buffer>;
}

function hmac(key: Buffer, byte: number): Buffer {
  return createHmac('sha256', key)
    .update(Buffer.from([byte]))
    .digest();
}

/** The message key for the chain's current iteration: iv (16 bytes) and AES-256 key (32 bytes). */
function messageKey(seed: Buffer): { iv: Buffer; key: Buffer } {
  const derived = Buffer.from(hkdfSync('sha256', seed, Buffer.alloc(32), Buffer.from('WhisperGroup'), 48));
  return { iv: derived.subarray(0, 16), key: derived.subarray(16, 48) };
}

function next(chain: ChainKey): ChainKey {
  return { iteration: chain.iteration + 1, key: hmac(chain.key, 0x02) };
}

/** A parsed SenderKeyDistributionMessage. */
export interface SenderKeyDistribution {
  keyId: number;
  iteration: number;
  chainKey: Buffer;
  /** 33 bytes (0x05 + key). */
  signingKey: Buffer;
}

/**
 * Reads an SKDM (0x33 + protobuf).
 * @throws SignalError when the version or a field is wrong.
 */
export function parseDistribution(bytes: Uint8Array): SenderKeyDistribution {
  if (bytes[0] !== VERSION) throw new SignalError(`sender key distribution version ${bytes[0]} is not 3`);
  const decoded = proto.SenderKeyDistributionMessage.decode(bytes.subarray(1));
  const chainKey = decoded.chainKey ? Buffer.from(decoded.chainKey) : undefined;
  let signingKey = decoded.signingKey ? Buffer.from(decoded.signingKey) : undefined;
  if (signingKey?.length === 32) signingKey = Buffer.concat([Buffer.from([5]), signingKey]);
  if (
    decoded.id == null ||
    decoded.iteration == null ||
    chainKey?.length !== 32 ||
    signingKey?.length !== 33
  ) {
    throw new SignalError(
      'sender key distribution needs id, iteration, a 32-byte chain key and a signing key',
    );
  }
  return { keyId: decoded.id, iteration: decoded.iteration, chainKey, signingKey };
}

/** The sender keys one device holds: its own per group, and every other member's it has received. */
export class SenderKeys {
  private readonly states = new Map<string, SenderKeyState>();

  /** `own`: our own address (any stable string); other senders are keyed by the caller's address for them. */
  constructor(private readonly own: string) {}

  /** Every sender key held, by `group::sender` (plain data; not a copy): what a state file keeps. */
  exportState(): Map<string, SenderKeyState> {
    return this.states;
  }

  /** Replaces every sender key held with `states` (as {@link exportState} gave them). */
  restoreState(states: Map<string, SenderKeyState>): void {
    this.states.clear();
    for (const [name, state] of states) this.states.set(name, state);
  }

  private name(group: string, sender: string): string {
    return `${group}::${sender}`;
  }

  private ownState(group: string): SenderKeyState {
    const name = this.name(group, this.own);
    let state = this.states.get(name);
    if (!state) {
      const signing = curve.generateKeyPair();
      state = {
        keyId: randomInt(0x7fffffff),
        chain: { iteration: 0, key: randomBytes(32) },
        signingPublic: Buffer.from(signing.pubKey),
        signingPrivate: Buffer.from(signing.privKey),
        skipped: new Map(),
      };
      this.states.set(name, state);
    }
    return state;
  }

  /** Our SKDM for `group` at the current iteration (creating our sender key on first use). */
  distribution(group: string): Buffer {
    const state = this.ownState(group);
    const body = proto.SenderKeyDistributionMessage.encode({
      id: state.keyId,
      iteration: state.chain.iteration,
      chainKey: state.chain.key,
      signingKey: state.signingPublic,
    }).finish();
    return Buffer.concat([Buffer.from([VERSION]), body]);
  }

  /** Encrypts `padded` for `group` with our sender key: the `skmsg` bytes. The chain moves one step. */
  encrypt(group: string, padded: Uint8Array): Buffer {
    const state = this.ownState(group);
    const { iv, key } = messageKey(hmac(state.chain.key, 0x01));
    const cipher = createCipheriv('aes-256-cbc', key, iv);
    const ciphertext = Buffer.concat([cipher.update(padded), cipher.final()]);
    const body = proto.SenderKeyMessage.encode({
      id: state.keyId,
      iteration: state.chain.iteration,
      ciphertext,
    }).finish();
    state.chain = next(state.chain);
    const signed = Buffer.concat([Buffer.from([VERSION]), body]);
    if (!state.signingPrivate) throw new SignalError(`no signing key for own sender key in ${group}`);
    return Buffer.concat([signed, Buffer.from(curve.calculateSignature(state.signingPrivate, signed))]);
  }

  /** Stores `sender`'s sender key for `group` from its SKDM (a newer key id replaces the old one). */
  process(group: string, sender: string, skdm: Uint8Array): void {
    const d = parseDistribution(skdm);
    this.states.set(this.name(group, sender), {
      keyId: d.keyId,
      chain: { iteration: d.iteration, key: d.chainKey },
      signingPublic: d.signingKey,
      skipped: new Map(),
    });
  }

  /** True when we hold `sender`'s sender key for `group`. */
  has(group: string, sender: string): boolean {
    return this.states.has(this.name(group, sender));
  }

  /**
   * Decrypts an `skmsg` from `sender` in `group`: checks the signature, steps the chain to the message's
   * iteration (keeping skipped keys), and returns the padded plaintext.
   * @throws SignalError with no sender key, another key id, a bad signature, a reused or too distant
   *   iteration, or a ciphertext that does not decrypt.
   */
  decrypt(group: string, sender: string, skmsg: Uint8Array): Buffer {
    const state = this.states.get(this.name(group, sender));
    if (!state) throw new SignalError(`no sender key from ${sender} in ${group}`);
    if (skmsg.length <= SIGNATURE_LENGTH + 1 || skmsg[0] !== VERSION) {
      throw new SignalError('sender key message is not a version 3 message');
    }
    const signed = skmsg.subarray(0, skmsg.length - SIGNATURE_LENGTH);
    const signature = skmsg.subarray(skmsg.length - SIGNATURE_LENGTH);
    if (!curve.verifySignature(state.signingPublic, signed, signature)) {
      throw new SignalError(`sender key message from ${sender} has a bad signature`);
    }
    const message = proto.SenderKeyMessage.decode(signed.subarray(1));
    if (message.id !== state.keyId)
      throw new SignalError(`sender key id ${message.id} is unknown for ${sender}`);
    const iteration = message.iteration ?? 0;
    // Work on copies; the state changes only once the message decrypted (libsignal stores after success).
    let seed: Buffer | undefined;
    let chain = state.chain;
    const skipped = new Map(state.skipped);
    if (iteration < chain.iteration) {
      seed = skipped.get(iteration);
      if (!seed) throw new SignalError(`sender key iteration ${iteration} from ${sender} was used already`);
      skipped.delete(iteration);
    } else {
      if (iteration - chain.iteration > MAX_SKIP) {
        throw new SignalError(`sender key iteration ${iteration} is over ${MAX_SKIP} ahead`);
      }
      while (chain.iteration < iteration) {
        skipped.set(chain.iteration, hmac(chain.key, 0x01));
        chain = next(chain);
      }
      seed = hmac(chain.key, 0x01);
      chain = next(chain);
    }
    const { iv, key } = messageKey(seed);
    let plaintext: Buffer;
    try {
      const decipher = createDecipheriv('aes-256-cbc', key, iv);
      plaintext = Buffer.concat([decipher.update(message.ciphertext ?? Buffer.alloc(0)), decipher.final()]);
    } catch (error) {
      throw new SignalError(`sender key message from ${sender} does not decrypt`, { cause: error });
    }
    for (const old of skipped.keys()) {
      if (skipped.size <= MAX_SKIPPED_KEYS) break;
      skipped.delete(old);
    }
    state.chain = chain;
    state.skipped = skipped;
    return plaintext;
  }
}
