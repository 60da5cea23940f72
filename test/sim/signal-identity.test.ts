/**
 * The phone's check of a companion's device identity, on an identity Baileys itself countersigned at pairing
 * (configureSuccessfulPairing) and encodes on its pkmsgs (encodeSignedDeviceIdentity).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type BinaryNode,
  Curve,
  configureSuccessfulPairing,
  encodeSignedDeviceIdentity,
  hmacSign,
  initAuthCreds,
  proto,
} from 'baileys';
import { SignalError, verifyDeviceIdentity } from '../../sim/signal/index.ts';

/** A companion paired the way the platform pairs it: the phone signs, Baileys countersigns. */
function pairedCompanion(keyIndex: number) {
  const creds = initAuthCreds();
  const accountKey = Curve.generateKeyPair();
  const details = proto.ADVDeviceIdentity.encode({ rawId: 7, timestamp: 1_760_000_000, keyIndex }).finish();
  const accountSignature = Curve.sign(
    accountKey.private,
    Buffer.concat([Buffer.from([6, 0]), details, creds.signedIdentityKey.public]),
  );
  const signed = proto.ADVSignedDeviceIdentity.encode({
    details,
    accountSignatureKey: accountKey.public,
    accountSignature,
  }).finish();
  const hmac = hmacSign(signed, Buffer.from(creds.advSecretKey, 'base64'));
  const stanza: BinaryNode = {
    tag: 'iq',
    attrs: { id: 'p1', type: 'set', from: 's.whatsapp.net' },
    content: [
      {
        tag: 'pair-success',
        attrs: {},
        content: [
          {
            tag: 'device-identity',
            attrs: {},
            content: proto.ADVSignedDeviceIdentityHMAC.encode({ details: signed, hmac }).finish(),
          },
          { tag: 'device', attrs: { jid: '15550002222:1@s.whatsapp.net', lid: '800000000000002:1@lid' } },
        ],
      },
    ],
  };
  const { creds: update } = configureSuccessfulPairing(stanza, creds);
  assert.ok(update.account);
  return { creds, accountKey, account: update.account };
}

describe('companion device identity', () => {
  it('verifies what Baileys attaches to its pkmsgs and returns the key index', () => {
    const { creds, accountKey, account } = pairedCompanion(3);
    const bytes = encodeSignedDeviceIdentity(account, true);
    assert.deepEqual(verifyDeviceIdentity(bytes, accountKey.public, creds.signedIdentityKey.public), {
      rawId: 7,
      timestamp: 1_760_000_000,
      keyIndex: 3,
      deviceType: 0,
    });
  });

  it('refuses another account, another device, and altered details', () => {
    const { creds, accountKey, account } = pairedCompanion(1);
    const bytes = encodeSignedDeviceIdentity(account, true);
    const stranger = Curve.generateKeyPair().public;
    assert.throws(
      () => verifyDeviceIdentity(bytes, stranger, creds.signedIdentityKey.public),
      /another account/,
    );
    const withoutKey = encodeSignedDeviceIdentity(account, false);
    assert.throws(
      () => verifyDeviceIdentity(withoutKey, stranger, creds.signedIdentityKey.public),
      /account signature/,
    );
    assert.throws(() => verifyDeviceIdentity(bytes, accountKey.public, stranger), /account signature/);
    const altered = proto.ADVSignedDeviceIdentity.decode(bytes);
    altered.details = proto.ADVDeviceIdentity.encode({
      rawId: 7,
      timestamp: 1_760_000_000,
      keyIndex: 9,
    }).finish();
    assert.throws(
      () =>
        verifyDeviceIdentity(
          proto.ADVSignedDeviceIdentity.encode(altered).finish(),
          accountKey.public,
          creds.signedIdentityKey.public,
        ),
      SignalError,
    );
    const unsigned = proto.ADVSignedDeviceIdentity.decode(bytes);
    unsigned.deviceSignature = Buffer.alloc(64, 1);
    assert.throws(
      () =>
        verifyDeviceIdentity(
          proto.ADVSignedDeviceIdentity.encode(unsigned).finish(),
          accountKey.public,
          creds.signedIdentityKey.public,
        ),
      /device signature/,
    );
    assert.throws(
      () => verifyDeviceIdentity(Buffer.from([0xff, 0xff]), accountKey.public, stranger),
      /does not decode/,
    );
  });
});
