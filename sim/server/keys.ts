/**
 * Signal key material on the wire, as Baileys 7 writes and reads it (Utils/signal.js getNextPreKeysNode,
 * xmppSignedPreKey, xmppPreKey, parseAndInjectE2ESessions): registration ids as 4-byte big-endian, key ids as
 * 3-byte big-endian, public keys as 32 bytes without the 0x05 type byte, `type` = KEY_BUNDLE_TYPE (5).
 */
import { createHash } from 'node:crypto';
import {
  type BinaryNode,
  getBinaryNodeChild,
  getBinaryNodeChildBuffer,
  getBinaryNodeChildren,
  KEY_BUNDLE_TYPE,
  type proto,
} from 'baileys';
import type { Accounts, DeviceKeys, SignedPreKey } from '../model/accounts.ts';

function bigEndian(value: number, bytes: number): Buffer {
  const out = Buffer.alloc(bytes);
  out.writeUIntBE(value, 0, bytes);
  return out;
}

function readUInt(data: Uint8Array | undefined): number | undefined {
  if (!data || data.length === 0 || data.length > 6) return undefined;
  return Buffer.from(data).readUIntBE(0, data.length);
}

function strip(key: Uint8Array): Buffer {
  return Buffer.from(key.length === 33 ? key.subarray(1) : key);
}

/** Reads an `<skey><id/><value/><signature/></skey>` node. Throws Error when a part is missing. */
export function signedPreKeyFromNode(skey: BinaryNode): SignedPreKey {
  const id = readUInt(getBinaryNodeChildBuffer(skey, 'id'));
  const value = getBinaryNodeChildBuffer(skey, 'value');
  const signature = getBinaryNodeChildBuffer(skey, 'signature');
  if (id === undefined || !value || !signature) throw new Error('skey needs id, value and signature');
  return { id, public: strip(value), signature: Buffer.from(signature) };
}

/** Reads an `encrypt` set iq (pre-key upload); undefined when it lacks a part. */
export function deviceKeysFromUpload(iq: BinaryNode): DeviceKeys | undefined {
  const registrationId = readUInt(getBinaryNodeChildBuffer(iq, 'registration'));
  const identity = getBinaryNodeChildBuffer(iq, 'identity');
  const skey = getBinaryNodeChild(iq, 'skey');
  const list = getBinaryNodeChild(iq, 'list');
  if (registrationId === undefined || !identity || !skey || !list) return undefined;
  const preKeys = new Map<number, Buffer>();
  for (const key of getBinaryNodeChildren(list, 'key')) {
    const id = readUInt(getBinaryNodeChildBuffer(key, 'id'));
    const value = getBinaryNodeChildBuffer(key, 'value');
    if (id !== undefined && value) preKeys.set(id, strip(value));
  }
  try {
    return { registrationId, identity: strip(identity), signedPreKey: signedPreKeyFromNode(skey), preKeys };
  } catch {
    return undefined;
  }
}

/**
 * Reads the companion's keys from ClientPayload.devicePairingData (Utils/validate-connection.js
 * generateRegistrationNode: eRegid, eIdent, eSkeyId, eSkeyVal, eSkeySig). Throws Error when a part is missing.
 */
export function deviceKeysFromPairing(data: proto.ClientPayload.IDevicePairingRegistrationData): DeviceKeys {
  const registrationId = readUInt(data.eRegid ?? undefined);
  const skeyId = readUInt(data.eSkeyId ?? undefined);
  if (
    registrationId === undefined ||
    skeyId === undefined ||
    !data.eIdent ||
    !data.eSkeyVal ||
    !data.eSkeySig
  ) {
    throw new Error('devicePairingData needs eRegid, eIdent, eSkeyId, eSkeyVal and eSkeySig');
  }
  return {
    registrationId,
    identity: strip(data.eIdent),
    signedPreKey: { id: skeyId, public: strip(data.eSkeyVal), signature: Buffer.from(data.eSkeySig) },
    preKeys: new Map(),
  };
}

function skeyNode(skey: SignedPreKey): BinaryNode {
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
 * The `<digest>` answer to `encrypt` get digest: the registered keys plus the ids of the one-time pre-keys
 * and a SHA-1 over identity, signed pre-key, signature and pre-keys (the platform's digest shape).
 */
export function keysDigestNode(keys: DeviceKeys): BinaryNode {
  const ids = [...keys.preKeys.keys()].sort((a, b) => a - b);
  const hash = createHash('sha1')
    .update(keys.identity)
    .update(keys.signedPreKey.public)
    .update(keys.signedPreKey.signature);
  for (const id of ids) hash.update(keys.preKeys.get(id) ?? Buffer.alloc(0));
  return {
    tag: 'digest',
    attrs: {},
    content: [
      { tag: 'registration', attrs: {}, content: bigEndian(keys.registrationId, 4) },
      { tag: 'type', attrs: {}, content: KEY_BUNDLE_TYPE },
      { tag: 'identity', attrs: {}, content: keys.identity },
      skeyNode(keys.signedPreKey),
      {
        tag: 'list',
        attrs: {},
        content: ids.map((id) => ({ tag: 'id', attrs: {}, content: bigEndian(id, 3) })),
      },
      { tag: 'hash', attrs: {}, content: hash.digest() },
    ],
  };
}

/**
 * One `<user jid>` of a key fetch answer: the device's pre-key bundle, consuming one one-time pre-key (the
 * lowest id) when any is left. Unknown devices get `<error code=404 text=item-not-found/>`.
 */
export function keyBundleNode(accounts: Accounts, jid: string): BinaryNode {
  const target = accounts.resolve(jid);
  const device = target?.user.devices.get(target.device);
  const keys = device?.linked ? device.keys : undefined;
  if (!keys) {
    return {
      tag: 'user',
      attrs: { jid },
      content: [{ tag: 'error', attrs: { code: '404', text: 'item-not-found' } }],
    };
  }
  const content: BinaryNode[] = [
    { tag: 'registration', attrs: {}, content: bigEndian(keys.registrationId, 4) },
    { tag: 'type', attrs: {}, content: KEY_BUNDLE_TYPE },
    { tag: 'identity', attrs: {}, content: keys.identity },
    skeyNode(keys.signedPreKey),
  ];
  const preKeyId = [...keys.preKeys.keys()].sort((a, b) => a - b)[0];
  const preKey = preKeyId === undefined ? undefined : keys.preKeys.get(preKeyId);
  if (preKeyId !== undefined && preKey) {
    keys.preKeys.delete(preKeyId);
    content.push({
      tag: 'key',
      attrs: {},
      content: [
        { tag: 'id', attrs: {}, content: bigEndian(preKeyId, 3) },
        { tag: 'value', attrs: {}, content: preKey },
      ],
    });
  }
  return { tag: 'user', attrs: { jid }, content };
}
