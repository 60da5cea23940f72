/**
 * Signal key material on the wire, the way the platform and Baileys 7 exchange it (Baileys
 * lib/Utils/signal.js: getNextPreKeysNode, xmppSignedPreKey, xmppPreKey, parseAndInjectE2ESessions;
 * lib/Socket/messages-send.js assertSessions):
 * - registration ids are 4 bytes big-endian, key ids 3 bytes big-endian;
 * - public keys travel as 32 bytes without libsignal's 0x05 type byte, `<type>` carries that byte once
 *   (Baileys' KEY_BUNDLE_TYPE);
 * - a pre-key upload is `<iq xmlns="encrypt" type="set">` with registration, type, identity, list of `<key>`,
 *   `<skey>`; a key fetch is `<iq xmlns="encrypt" type="get"><key><user jid reason?/>…</key></iq>`, answered by
 *   `<iq type="result"><list><user jid>…bundle…</user>…</list></iq>`, one one-time pre-key handed out per
 *   fetch (the platform deletes it; a bundle without `<key>` is valid: libsignal then runs X3DH without it).
 */
import {
  type BinaryNode,
  getBinaryNodeChild,
  getBinaryNodeChildBuffer,
  getBinaryNodeChildren,
} from 'baileys';

/** Libsignal's key type byte (DJB curve25519), prefixed to 32-byte public keys inside Signal messages. */
export const KEY_TYPE_DJB = 5;

/** A signed pre-key as published: 24-bit id, 32-byte public key, 64-byte XEdDSA signature by the identity key. */
export interface SignedPreKey {
  id: number;
  public: Buffer;
  signature: Buffer;
}

/**
 * The public Signal keys one device publishes on the platform (what a pre-key upload carries, and what the
 * server keeps to answer key fetches). The same shape as the simulator's account model keeps per device.
 */
export interface DeviceKeys {
  /** 14-bit registration id (libsignal keyhelper.generateRegistrationId). */
  registrationId: number;
  /** 32-byte identity public key (no 0x05 type byte). */
  identity: Buffer;
  signedPreKey: SignedPreKey;
  /** One-time pre-keys by id (24-bit), 32-byte public keys; each is handed out by one key fetch, then removed. */
  preKeys: Map<number, Buffer>;
}

/**
 * One device's bundle as a key fetch hands it out (X3DH inputs): the published keys plus at most one
 * one-time pre-key, already removed from {@link DeviceKeys.preKeys}.
 */
export interface KeyBundle {
  registrationId: number;
  /** 32 bytes. */
  identity: Buffer;
  signedPreKey: SignedPreKey;
  preKey?: { id: number; public: Buffer };
}

/** A malformed key node (pre-key upload, key fetch); `message` names the missing or bad part. */
export class KeyNodeError extends Error {
  override readonly name = 'KeyNodeError';
}

/** `value` as `bytes` bytes big-endian (Baileys' encodeBigEndian). */
export function bigEndian(value: number, bytes: number): Buffer {
  const out = Buffer.alloc(bytes);
  out.writeUIntBE(value, 0, bytes);
  return out;
}

/** Reads an unsigned big-endian integer of exactly `bytes` bytes; undefined when absent or of another length. */
function readUInt(data: Uint8Array | undefined, bytes: number): number | undefined {
  if (!data || data.length !== bytes) return undefined;
  return Buffer.from(data).readUIntBE(0, bytes);
}

/** A 32-byte public key from the wire; a 33-byte one must start with the 0x05 type byte, which is dropped. */
function publicKey(data: Uint8Array | undefined, part: string): Buffer {
  if (data?.length === 33 && data[0] === KEY_TYPE_DJB) return Buffer.from(data.subarray(1));
  if (data?.length !== 32) throw new KeyNodeError(`${part} must be a 32-byte public key`);
  return Buffer.from(data);
}

/**
 * Reads `<skey><id/><value/><signature/></skey>` (Baileys' xmppSignedPreKey).
 * @throws KeyNodeError naming the missing or malformed part.
 */
export function parseSignedPreKey(skey: BinaryNode): SignedPreKey {
  const id = readUInt(getBinaryNodeChildBuffer(skey, 'id'), 3);
  if (id === undefined) throw new KeyNodeError('skey/id must be 3 bytes');
  const signature = getBinaryNodeChildBuffer(skey, 'signature');
  if (signature?.length !== 64) throw new KeyNodeError('skey/signature must be 64 bytes');
  return {
    id,
    public: publicKey(getBinaryNodeChildBuffer(skey, 'value'), 'skey/value'),
    signature: Buffer.from(signature),
  };
}

/**
 * Reads Baileys' pre-key upload, `<iq xmlns="encrypt" type="set">` with `registration` (4 bytes), `type`
 * (0x05), `identity` (32 bytes), `list` of `<key><id/><value/></key>` and `skey` (Baileys getNextPreKeysNode).
 * @throws KeyNodeError naming the part that is missing or malformed.
 */
export function parsePreKeyUpload(iq: BinaryNode): DeviceKeys {
  if (iq.tag !== 'iq' || iq.attrs.xmlns !== 'encrypt' || iq.attrs.type !== 'set') {
    throw new KeyNodeError('a pre-key upload is an iq with xmlns "encrypt" and type "set"');
  }
  const registrationId = readUInt(getBinaryNodeChildBuffer(iq, 'registration'), 4);
  if (registrationId === undefined) throw new KeyNodeError('registration must be 4 bytes');
  const type = getBinaryNodeChildBuffer(iq, 'type');
  if (type?.length !== 1 || type[0] !== KEY_TYPE_DJB) throw new KeyNodeError('type must be the byte 0x05');
  const identity = publicKey(getBinaryNodeChildBuffer(iq, 'identity'), 'identity');
  const skey = getBinaryNodeChild(iq, 'skey');
  if (!skey) throw new KeyNodeError('skey is missing');
  const list = getBinaryNodeChild(iq, 'list');
  if (!list) throw new KeyNodeError('list is missing');
  const preKeys = new Map<number, Buffer>();
  for (const key of getBinaryNodeChildren(list, 'key')) {
    const id = readUInt(getBinaryNodeChildBuffer(key, 'id'), 3);
    if (id === undefined) throw new KeyNodeError('list/key/id must be 3 bytes');
    preKeys.set(id, publicKey(getBinaryNodeChildBuffer(key, 'value'), `list/key ${id}/value`));
  }
  return { registrationId, identity, signedPreKey: parseSignedPreKey(skey), preKeys };
}

/**
 * Adds a later upload of the same device to the keys held (Baileys uploads again when the server's count is
 * low): new one-time pre-keys are added (same id: replaced), the signed pre-key and registration follow the
 * upload. A different identity replaces everything (the device was re-registered).
 */
export function mergePreKeyUpload(held: DeviceKeys, upload: DeviceKeys): DeviceKeys {
  if (!held.identity.equals(upload.identity)) return upload;
  for (const [id, key] of upload.preKeys) held.preKeys.set(id, key);
  held.signedPreKey = upload.signedPreKey;
  held.registrationId = upload.registrationId;
  return held;
}

/**
 * Hands out one bundle, as the platform answers one `<user>` of a key fetch: the lowest-id one-time pre-key
 * is removed from `keys.preKeys` and included; when none is left the bundle has none.
 */
export function takeBundle(keys: DeviceKeys): KeyBundle {
  const bundle: KeyBundle = {
    registrationId: keys.registrationId,
    identity: keys.identity,
    signedPreKey: keys.signedPreKey,
  };
  let lowest: number | undefined;
  for (const id of keys.preKeys.keys()) if (lowest === undefined || id < lowest) lowest = id;
  const value = lowest === undefined ? undefined : keys.preKeys.get(lowest);
  if (lowest !== undefined && value) {
    keys.preKeys.delete(lowest);
    bundle.preKey = { id: lowest, public: value };
  }
  return bundle;
}

/** `<skey><id/><value/><signature/></skey>` (Baileys' xmppSignedPreKey). */
export function signedPreKeyNode(skey: SignedPreKey): BinaryNode {
  return {
    tag: 'skey',
    attrs: {},
    content: [
      { tag: 'id', attrs: {}, content: bigEndian(skey.id, 3) },
      { tag: 'value', attrs: {}, content: skey.public },
      { tag: 'signature', attrs: {}, content: skey.signature },
    ],
  };
}

/**
 * One `<user jid>` of a key fetch answer, as Baileys' parseAndInjectE2ESessions reads it: `registration`
 * (4 bytes), `type` (0x05), `identity` (32 bytes), `skey`, and `key` when the bundle has a one-time pre-key.
 * `jid` is the device JID exactly as asked (Baileys 7 asks by LID: `<lid>[:<device>]@lid`).
 */
export function keyBundleUserNode(jid: string, bundle: KeyBundle): BinaryNode {
  const content: BinaryNode[] = [
    { tag: 'registration', attrs: {}, content: bigEndian(bundle.registrationId, 4) },
    { tag: 'type', attrs: {}, content: Buffer.from([KEY_TYPE_DJB]) },
    { tag: 'identity', attrs: {}, content: bundle.identity },
    signedPreKeyNode(bundle.signedPreKey),
  ];
  if (bundle.preKey) content.push(preKeyNode(bundle.preKey));
  return { tag: 'user', attrs: { jid }, content };
}

/** `<key><id/><value/></key>`: one one-time pre-key, 24-bit id and 32-byte public key (Baileys' xmppPreKey). */
export function preKeyNode(preKey: { id: number; public: Buffer }): BinaryNode {
  return {
    tag: 'key',
    attrs: {},
    content: [
      { tag: 'id', attrs: {}, content: bigEndian(preKey.id, 3) },
      { tag: 'value', attrs: {}, content: preKey.public },
    ],
  };
}

/**
 * A `<user jid>` that carries an error instead of a bundle (unknown device: 404 item-not-found). Note that
 * Baileys' parseAndInjectE2ESessions throws on any such user (assertNodeErrorFree), failing the whole fetch.
 */
export function keyErrorUserNode(jid: string, code = 404, text = 'item-not-found'): BinaryNode {
  return { tag: 'user', attrs: { jid }, content: [{ tag: 'error', attrs: { code: String(code), text } }] };
}

/** One device asked for by a key fetch: its JID, and `reason` ("identity" when Baileys forces a refresh). */
export interface KeyFetchTarget {
  jid: string;
  reason?: string;
}

/**
 * Reads Baileys' key fetch `<iq xmlns="encrypt" type="get"><key><user jid reason?/>…</key></iq>`
 * (messages-send.js assertSessions); undefined when the iq is another `encrypt` get (count, digest).
 * @throws KeyNodeError when a `<user>` lacks its jid.
 */
export function parseKeyFetch(iq: BinaryNode): KeyFetchTarget[] | undefined {
  if (iq.tag !== 'iq' || iq.attrs.xmlns !== 'encrypt' || iq.attrs.type !== 'get') return undefined;
  const key = getBinaryNodeChild(iq, 'key');
  if (!key) return undefined;
  return getBinaryNodeChildren(key, 'user').map((user) => {
    const jid = user.attrs.jid;
    if (!jid) throw new KeyNodeError('key/user needs a jid');
    return user.attrs.reason ? { jid, reason: user.attrs.reason } : { jid };
  });
}

/** The answer to a key fetch: `<iq id from="s.whatsapp.net" type="result"><list>users</list></iq>`. */
export function keyFetchResultNode(id: string, users: BinaryNode[]): BinaryNode {
  return {
    tag: 'iq',
    attrs: { id, from: 's.whatsapp.net', type: 'result' },
    content: [{ tag: 'list', attrs: {}, content: users }],
  };
}
