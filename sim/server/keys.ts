/**
 * Signal key material on the wire, as Baileys 7 writes and reads it (Utils/signal.js getNextPreKeysNode,
 * xmppSignedPreKey, xmppPreKey, parseAndInjectE2ESessions): registration ids as 4-byte big-endian, key ids as
 * 3-byte big-endian, public keys as 32 bytes without the 0x05 type byte, `type` = KEY_BUNDLE_TYPE (5).
 */
import { createHash } from 'node:crypto';
import { type BinaryNode, KEY_BUNDLE_TYPE, type proto } from 'baileys';
import type { Accounts, DeviceKeys } from '../model/accounts.ts';
import {
  bigEndian,
  keyBundleUserNode,
  keyErrorUserNode,
  signedPreKeyNode,
  takeBundle,
} from '../signal/index.ts';

function readUInt(data: Uint8Array | undefined): number | undefined {
  if (!data || data.length === 0 || data.length > 6) return undefined;
  return Buffer.from(data).readUIntBE(0, data.length);
}

function strip(key: Uint8Array): Buffer {
  return Buffer.from(key.length === 33 ? key.subarray(1) : key);
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
      signedPreKeyNode(keys.signedPreKey),
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
 * One `<user jid>` of a key fetch answer: the device's pre-key bundle, consuming its lowest one-time pre-key
 * when any is left (signal/keys.ts takeBundle). Unknown or unlinked devices get `<error code=404/>`.
 */
export function keyBundleNode(accounts: Accounts, jid: string): BinaryNode {
  const target = accounts.resolve(jid);
  const device = target?.user.devices.get(target.device);
  const keys = device?.linked ? device.keys : undefined;
  return keys ? keyBundleUserNode(jid, takeBundle(keys)) : keyErrorUserNode(jid);
}
