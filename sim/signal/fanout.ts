/**
 * Sending one message to several devices, and answering retry receipts — the sender's side of the platform's
 * multi-device fan-out: a message is encrypted separately for every device of the recipient and for the
 * sender's own other devices, the latter wrapped as `deviceSentMessage { destinationJid, message }`
 * (Baileys lib/Socket/messages-send.js relayMessage / createParticipantNodes). A device the sender has no
 * session with gets one from a bundle first (X3DH), so its copy is a pkmsg.
 *
 * Retry receipts: a device that could not decrypt answers `<receipt type="retry">` with `<retry count id t v>`,
 * `<registration>` and, from the second try or when it dropped the session, `<keys>` holding a fresh bundle
 * (Baileys messages-recv.js sendRetryRequest; read by Baileys' own extractE2ESessionFromRetryReceipt).
 */
import { type BinaryNode, getBinaryNodeChild, getBinaryNodeChildBuffer, type proto } from 'baileys';
import { type Ciphertext, SignalError, type SimDevice } from './device.ts';
import {
  type DeviceKeys,
  KEY_TYPE_DJB,
  type KeyBundle,
  KeyNodeError,
  parseSignedPreKey,
  takeBundle,
} from './keys.ts';

/** One device to send to. */
export interface FanoutTarget {
  /** The device JID, PN or LID (`<user>[:<device>]@s.whatsapp.net|lid`). */
  jid: string;
  /**
   * The device's published keys, used (one one-time pre-key consumed) when the sender has no session with it
   * yet. Undefined: the sender must already have a session.
   */
  keys?: DeviceKeys;
  /** True for the sender's own other devices: they get the message wrapped as a deviceSentMessage. */
  own?: boolean;
}

/** The ciphertext for one device. */
export interface FanoutCiphertext {
  jid: string;
  enc: Ciphertext;
  /** True when a session was opened from the device's bundle for this message. */
  newSession: boolean;
}

/**
 * Encrypts `message` for every target, opening sessions from bundles where needed. `destinationJid` is the
 * chat, written into the copies for the sender's own devices.
 * @throws SignalError naming the device when there is no session and no keys to open one.
 */
export async function encryptToDevices(
  sender: SimDevice,
  targets: FanoutTarget[],
  message: proto.IMessage,
  destinationJid: string,
): Promise<FanoutCiphertext[]> {
  const out: FanoutCiphertext[] = [];
  for (const target of targets) {
    let newSession = false;
    if (!(await sender.hasSession(target.jid))) {
      if (!target.keys) throw new SignalError(`no session with ${target.jid} and no keys to open one`);
      await sender.startSession(target.jid, takeBundle(target.keys));
      newSession = true;
    }
    const payload: proto.IMessage = target.own ? { deviceSentMessage: { destinationJid, message } } : message;
    out.push({ jid: target.jid, enc: await sender.encryptMessage(target.jid, payload), newSession });
  }
  return out;
}

/** A retry receipt: which message a device could not decrypt, and the bundle it sent, if any. */
export interface RetryReceipt {
  /** The message id (`<receipt id>`). */
  id: string;
  /** The device asking: the sender of the receipt (the server knows it from the socket). */
  from: string;
  /** Who the failed message came from (`<receipt to>`). */
  to: string;
  /** `participant` (groups) and `recipient` attributes, when present. */
  participant?: string;
  recipient?: string;
  /** Retry number, 1 on the first retry. */
  count: number;
  /** The asking device's registration id. */
  registrationId: number;
  /** A fresh bundle (`<keys>`), sent from the second retry or when the device dropped its session. */
  bundle?: KeyBundle;
}

function uint(data: Uint8Array | undefined, bytes: number, part: string): number {
  if (data?.length !== bytes) throw new KeyNodeError(`${part} must be ${bytes} bytes`);
  return Buffer.from(data).readUIntBE(0, bytes);
}

function key32(data: Uint8Array | undefined, part: string): Buffer {
  if (data?.length !== 32) throw new KeyNodeError(`${part} must be a 32-byte public key`);
  return Buffer.from(data);
}

/**
 * Reads a `<receipt type="retry">` as Baileys sends it (messages-recv.js sendRetryRequest) from device `from`;
 * undefined for any other receipt.
 * @throws KeyNodeError naming the part when the retry, registration or keys are malformed.
 */
export function parseRetryReceipt(node: BinaryNode, from: string): RetryReceipt | undefined {
  if (node.tag !== 'receipt' || node.attrs.type !== 'retry') return undefined;
  const retry = getBinaryNodeChild(node, 'retry');
  const { id, to } = node.attrs;
  if (!retry || !id || !to) throw new KeyNodeError('a retry receipt needs id, to and <retry>');
  const count = Number(retry.attrs.count ?? '1');
  if (!Number.isInteger(count) || count < 1) throw new KeyNodeError('retry/count must be a positive integer');
  const receipt: RetryReceipt = {
    id,
    from,
    to,
    count,
    registrationId: uint(getBinaryNodeChildBuffer(node, 'registration'), 4, 'registration'),
  };
  if (node.attrs.participant) receipt.participant = node.attrs.participant;
  if (node.attrs.recipient) receipt.recipient = node.attrs.recipient;
  const keys = getBinaryNodeChild(node, 'keys');
  if (keys) {
    const type = getBinaryNodeChildBuffer(keys, 'type');
    if (type?.length !== 1 || type[0] !== KEY_TYPE_DJB)
      throw new KeyNodeError('keys/type must be the byte 0x05');
    const skey = getBinaryNodeChild(keys, 'skey');
    if (!skey) throw new KeyNodeError('keys/skey is missing');
    const bundle: KeyBundle = {
      registrationId: receipt.registrationId,
      identity: key32(getBinaryNodeChildBuffer(keys, 'identity'), 'keys/identity'),
      signedPreKey: parseSignedPreKey(skey),
    };
    const preKey = getBinaryNodeChild(keys, 'key');
    if (preKey) {
      bundle.preKey = {
        id: uint(getBinaryNodeChildBuffer(preKey, 'id'), 3, 'keys/key/id'),
        public: key32(getBinaryNodeChildBuffer(preKey, 'value'), 'keys/key/value'),
      };
    }
    receipt.bundle = bundle;
  }
  return receipt;
}

/**
 * Re-encrypts `message` for the device that sent `retry`, in a fresh session: from the bundle in the receipt,
 * otherwise from `keys` (the device's published keys, one one-time pre-key consumed). The result is a pkmsg,
 * which the device can decrypt whatever state its old session was in; send it with `<enc count="N">`
 * (attrs `{ count: String(retry.count) }`, as Baileys' relayMessage does for resends). The old session is closed,
 * not deleted (libsignal SessionBuilder.initOutgoing keeps it in the record): a message the device had already
 * encrypted in it, still on its way, decrypts.
 * @throws SignalError when neither the receipt nor `keys` holds a bundle, or the bundle's signature is bad.
 */
export async function answerRetry(
  sender: SimDevice,
  retry: RetryReceipt,
  message: proto.IMessage,
  keys?: DeviceKeys,
): Promise<Ciphertext> {
  const bundle = retry.bundle ?? (keys ? takeBundle(keys) : undefined);
  if (!bundle) throw new SignalError(`retry from ${retry.from}: no bundle to open a new session with`);
  await sender.startSession(retry.from, bundle);
  return sender.encryptMessage(retry.from, message);
}
