/**
 * The check a phone makes on a companion device's `<device-identity>` (an ADVSignedDeviceIdentity, attached to
 * every pkmsg a companion sends; Baileys messages-send.js relayMessage, encodeSignedDeviceIdentity): the
 * account key signed the device's details and identity key at pairing, and the device countersigned them
 * (Baileys lib/Utils/validate-connection.js configureSuccessfulPairing):
 * - accountSignature = XEdDSA(account key, prefix ‖ details ‖ device identity key), prefix 0x06 0x00
 *   (0x06 0x05 for hosted devices);
 * - deviceSignature = XEdDSA(device identity key, 0x06 0x01 ‖ details ‖ device identity key ‖ account key);
 * - details = ADVDeviceIdentity { rawId, timestamp, keyIndex, deviceType }.
 * Keys are 32-byte curve25519 public keys (the 0x05 type byte is added for verification, as libsignal wants).
 */
import { proto } from 'baileys';
import * as curve from 'libsignal/src/curve.js';
import { SignalError } from './errors.ts';

const ACCOUNT_PREFIX = Buffer.from([6, 0]);
const DEVICE_PREFIX = Buffer.from([6, 1]);
const HOSTED_ACCOUNT_PREFIX = Buffer.from([6, 5]);

/** What a verified device identity says about the device. */
export interface DeviceIdentity {
  rawId: number;
  /** Unix seconds of the pairing. */
  timestamp: number;
  /** The device's index in the account's key index list (1, 2, … for companions). */
  keyIndex: number;
  /** ADVEncryptionType: 0 end-to-end, 1 hosted. */
  deviceType: number;
}

function typed(key: Uint8Array): Buffer {
  return key.length === 33 ? Buffer.from(key) : Buffer.concat([Buffer.from([5]), key]);
}

function untyped(key: Uint8Array): Buffer {
  return key.length === 33 ? Buffer.from(key.subarray(1)) : Buffer.from(key);
}

/**
 * Verifies a companion's ADVSignedDeviceIdentity bytes against the account key (32 bytes, the account's ADV
 * signing key the phone holds) and the companion's Signal identity key (32 bytes, e.g. the identity of its
 * pkmsg). Returns the device details.
 * @throws SignalError naming the failed check: undecodable bytes, another account key, a bad account or device
 *   signature.
 */
export function verifyDeviceIdentity(
  bytes: Uint8Array,
  accountKey: Uint8Array,
  deviceIdentityKey: Uint8Array,
): DeviceIdentity {
  let signed: proto.ADVSignedDeviceIdentity;
  let details: proto.ADVDeviceIdentity;
  try {
    signed = proto.ADVSignedDeviceIdentity.decode(bytes);
    details = proto.ADVDeviceIdentity.decode(signed.details ?? new Uint8Array());
  } catch (error) {
    throw new SignalError(`device identity does not decode: ${(error as Error).message}`, { cause: error });
  }
  const account = untyped(accountKey);
  const device = untyped(deviceIdentityKey);
  const detailBytes = Buffer.from(signed.details ?? new Uint8Array());
  if (signed.accountSignatureKey?.length && !untyped(signed.accountSignatureKey).equals(account)) {
    throw new SignalError("device identity names another account's signature key");
  }
  const hosted = details.deviceType === proto.ADVEncryptionType.HOSTED;
  const accountMessage = Buffer.concat([
    hosted ? HOSTED_ACCOUNT_PREFIX : ACCOUNT_PREFIX,
    detailBytes,
    device,
  ]);
  if (
    signed.accountSignature?.length !== 64 ||
    !curve.verifySignature(typed(account), accountMessage, signed.accountSignature)
  ) {
    throw new SignalError('device identity: account signature does not verify');
  }
  const deviceMessage = Buffer.concat([DEVICE_PREFIX, detailBytes, device, account]);
  if (
    signed.deviceSignature?.length !== 64 ||
    !curve.verifySignature(typed(device), deviceMessage, signed.deviceSignature)
  ) {
    throw new SignalError('device identity: device signature does not verify');
  }
  return {
    rawId: details.rawId ?? 0,
    timestamp: Number(details.timestamp ?? 0),
    keyIndex: details.keyIndex ?? 0,
    deviceType: details.deviceType ?? 0,
  };
}
