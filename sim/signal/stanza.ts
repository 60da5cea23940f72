/**
 * `<message>` stanzas carrying Signal ciphertexts, both ways:
 * - incoming (server → Baileys): the shape Baileys 7 accepts in lib/Socket/messages-recv.js handleMessage and
 *   lib/Utils/decode-wa-message.js decodeMessageNode / extractAddressingContext: attrs `id`, `from` (the
 *   sender's device JID, or the group), `type`, `t` (unix seconds), `notify` (push name), `participant`
 *   (group sender), `recipient` (the chat, when the sender is the account's own other device), the sender's
 *   other addressing (`sender_lid` / `sender_pn`, `participant_lid` / `participant_pn`), and one
 *   `<enc v="2" type="pkmsg|msg|skmsg">` per ciphertext;
 * - outgoing (Baileys → server): lib/Socket/messages-send.js relayMessage sends `<message id to type>` with
 *   `<participants><to jid><enc v="2" type/></to>…</participants>` (one ciphertext per device: the
 *   recipient's and the sender's own other devices), or a single `<enc>` child (retry resend, peer messages,
 *   the group `skmsg`), plus `<device-identity>` when any ciphertext is a pkmsg.
 */
import { type BinaryNode, getBinaryNodeChild, getBinaryNodeChildren } from 'baileys';
import type { Ciphertext } from './device.ts';

/** The `type` of an `<enc>`: Signal pkmsg / msg (1:1 sessions), skmsg (group sender keys). */
export type EncType = 'pkmsg' | 'msg' | 'skmsg';

/** A stanza that is not a well-formed message; `message` names the part. */
export class StanzaError extends Error {
  override readonly name = 'StanzaError';
}

/** One ciphertext to put in an incoming `<message>`. */
export interface EncInput {
  type: EncType;
  ciphertext: Uint8Array;
  /** Extra `<enc>` attributes, e.g. `mediatype`, `decrypt-fail`. */
  attrs?: Record<string, string>;
}

/** What an incoming `<message>` says (see {@link incomingMessageNode}). */
export interface IncomingMessage {
  /** Message id (the platform's: 16-32 upper-case hex characters for phones). */
  id: string;
  /** The sender's device JID (1:1), or the group JID (then `participant` is the sender). */
  from: string;
  /** `text` (default), `media`, `reaction`, `poll`, `event` (Baileys' getMessageType). */
  type?: string;
  /** Unix time in seconds; default now. */
  t?: number;
  /** The sender's push name (`notify`). */
  pushName?: string;
  /** Group messages: the sending device's JID. */
  participant?: string;
  /** A message the account sent from another of its devices: the chat it went to. `from` is then own. */
  recipient?: string;
  /**
   * The sender's other address: its LID user JID when the sender is addressed by phone, its phone JID when
   * addressed by LID. Written as `sender_lid`/`sender_pn` (1:1) or `participant_lid`/`participant_pn`
   * (groups); Baileys learns the PN↔LID mapping from it before decrypting.
   */
  senderAlt?: string;
  /** Ciphertexts, usually one. */
  enc: EncInput[];
  /** `<device-identity>` bytes (ADVSignedDeviceIdentity) a companion sender attaches to a pkmsg. */
  deviceIdentity?: Uint8Array;
  /** Any other attributes (e.g. `category`, `addressing_mode`, `edit`). */
  attrs?: Record<string, string>;
}

/** The `<message>` node the server sends to a device (Baileys' messages-recv accepts it). */
export function incomingMessageNode(input: IncomingMessage): BinaryNode {
  const attrs: Record<string, string> = {
    id: input.id,
    from: input.from,
    type: input.type ?? 'text',
    t: String(input.t ?? Math.floor(Date.now() / 1000)),
  };
  if (input.pushName !== undefined) attrs.notify = input.pushName;
  if (input.participant !== undefined) attrs.participant = input.participant;
  if (input.recipient !== undefined) attrs.recipient = input.recipient;
  if (input.senderAlt !== undefined) {
    const sender = input.participant ?? input.from;
    const role = input.participant !== undefined ? 'participant' : 'sender';
    attrs[sender.endsWith('@lid') ? `${role}_pn` : `${role}_lid`] = input.senderAlt;
  }
  Object.assign(attrs, input.attrs);
  const content: BinaryNode[] = input.enc.map((enc) => ({
    tag: 'enc',
    attrs: { v: '2', type: enc.type, ...enc.attrs },
    content: Buffer.from(enc.ciphertext),
  }));
  if (input.deviceIdentity) {
    content.push({ tag: 'device-identity', attrs: {}, content: Buffer.from(input.deviceIdentity) });
  }
  return { tag: 'message', attrs, content };
}

/** One ciphertext of an outgoing `<message>`, with the device it is for. */
export interface OutgoingEnc {
  /** The device JID it is for: `<to jid>`, or the stanza's `to` for a single `<enc>` child. */
  jid: string;
  type: EncType;
  ciphertext: Buffer;
  /** The `<enc>` attributes besides `v` and `type` (`mediatype`, `phash`, `count`, `decrypt-fail`…). */
  attrs: Record<string, string>;
}

/** A `<message>` a client sent, split into per-device ciphertexts. */
export interface OutgoingMessage {
  id: string;
  /** The chat: a user JID (1:1), a group, `status@broadcast`; or one device (retry resend). */
  to: string;
  type: string;
  /** All stanza attributes (`id`, `to`, `type`, `phash`, `category`, `addressing_mode`, `device_fanout`…). */
  attrs: Record<string, string>;
  /** One entry per ciphertext; `<participants>` entries first, then a direct `<enc>` child if any. */
  encs: OutgoingEnc[];
  /** `<device-identity>` bytes, present when the sender included its ADV identity (it sent a pkmsg). */
  deviceIdentity?: Buffer;
}

function encPart(jid: string, enc: BinaryNode, where: string): OutgoingEnc {
  const { v, type, ...attrs } = enc.attrs;
  if (v !== '2') throw new StanzaError(`${where}: enc v must be "2"`);
  if (type !== 'pkmsg' && type !== 'msg' && type !== 'skmsg') {
    throw new StanzaError(`${where}: enc type ${type ?? '(none)'} is not pkmsg, msg or skmsg`);
  }
  if (!(enc.content instanceof Uint8Array) || enc.content.length === 0) {
    throw new StanzaError(`${where}: enc has no ciphertext`);
  }
  return { jid, type, ciphertext: Buffer.from(enc.content), attrs };
}

/**
 * Splits a client's `<message>` into per-device ciphertexts (Baileys relayMessage's shape).
 * @throws StanzaError when the stanza lacks `id`/`to`, a `<to>` lacks its jid or `<enc>`, or an `<enc>` is not
 *   v2 pkmsg/msg/skmsg with bytes.
 */
export function parseOutgoingMessage(node: BinaryNode): OutgoingMessage {
  if (node.tag !== 'message') throw new StanzaError(`expected a message stanza, got ${node.tag}`);
  const { id, to } = node.attrs;
  if (!id) throw new StanzaError('message needs an id');
  if (!to) throw new StanzaError('message needs a to');
  const encs: OutgoingEnc[] = [];
  const participants = getBinaryNodeChild(node, 'participants');
  for (const target of participants ? getBinaryNodeChildren(participants, 'to') : []) {
    const jid = target.attrs.jid;
    if (!jid) throw new StanzaError('participants/to needs a jid');
    const enc = getBinaryNodeChild(target, 'enc');
    if (!enc) throw new StanzaError(`participants/to ${jid} has no enc`);
    encs.push(encPart(jid, enc, `to ${jid}`));
  }
  for (const enc of getBinaryNodeChildren(node, 'enc')) encs.push(encPart(to, enc, 'message/enc'));
  const message: OutgoingMessage = {
    id,
    to,
    type: node.attrs.type ?? 'text',
    attrs: { ...node.attrs },
    encs,
  };
  const identity = getBinaryNodeChild(node, 'device-identity')?.content;
  if (identity instanceof Uint8Array) message.deviceIdentity = Buffer.from(identity);
  return message;
}

/** The pkmsg/msg of an {@link OutgoingEnc} as a {@link Ciphertext} for SimDevice.decrypt. */
export function asCiphertext(enc: OutgoingEnc): Ciphertext {
  if (enc.type === 'skmsg') throw new StanzaError(`${enc.jid}: skmsg is a group sender-key message`);
  return { type: enc.type, ciphertext: enc.ciphertext };
}
