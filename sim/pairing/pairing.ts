/**
 * QR pairing as the platform runs it for a companion (Baileys' Socket/socket.js `pair-device` and
 * `pair-success` handlers, Utils/validate-connection.js configureSuccessfulPairing):
 *
 * 1. A socket whose client payload carries `devicePairingData` (a registration) gets an iq `pair-device`
 *    with several `<ref>`s; Baileys shows one QR per ref, rotating on its timer. The QR string is
 *    `https://wa.me/settings/linked_devices#<ref>,<noise key b64>,<identity key b64>,<adv secret b64>,<platform>`.
 * 2. The phone scans a QR (POST /control/scan): the account links a new device and sends `pair-success`
 *    carrying an ADVSignedDeviceIdentityHMAC — HMAC-SHA256 of the signed identity under the ADV secret read
 *    from the QR — whose inner ADVSignedDeviceIdentity is signed by the account key over
 *    `6,0 ‖ details ‖ companion identity key`.
 * 3. The companion verifies both, countersigns (`6,1 ‖ details ‖ identity ‖ account key`) and answers
 *    `pair-device-sign`; the server checks that signature, then ends the stream with 515 (restart required)
 *    and the companion logs in with its new credentials.
 *
 * Pairing by a code typed on the phone replaces steps 1–2 with the link-code exchange of link-code.ts, which
 * ends in the same `pair-success` ({@link Pairing.link}).
 */
import { createHmac, randomBytes } from 'node:crypto';
import { type BinaryNode, Curve, getBinaryNodeChild, proto, WA_ADV_ACCOUNT_SIG_PREFIX } from 'baileys';
import {
  type Accounts,
  type Device,
  type DeviceKeys,
  lidJid,
  ModelError,
  phoneJid,
  SERVER_JID,
  type User,
} from '../model/accounts.ts';
import type { Connection } from '../server/connection.ts';
import { verifyDeviceIdentity } from '../signal/index.ts';
import { LinkCodes } from './link-code.ts';

/** How many refs one pair-device iq carries (Baileys shows the first for 60 s, the others 20 s each). */
export const REFS_PER_PAIRING = 6;

/** How long the first ref of a pair-device iq stays scannable, ms (Baileys' default QR timer). */
export const FIRST_REF_MS = 60_000;

/** How much longer each following ref stays scannable, ms (Baileys' default QR timer after the first). */
export const NEXT_REF_MS = 20_000;

/**
 * When ref `index` (0-based) of a pair-device iq issued at `issuedAt` stops being scannable, ms since the
 * epoch: the end of its turn on Baileys' default QR schedule (60 s, then 20 s each). The platform refuses a
 * code whose turn is over, so a phone scanning a code that already rotated away gets "expired".
 */
export function refExpiresAt(issuedAt: number, index: number): number {
  return issuedAt + FIRST_REF_MS + index * NEXT_REF_MS;
}

/** A registration socket waiting for its QR code to be scanned. */
export interface PendingRegistration {
  connection: Connection;
  /** The companion's static Noise key (from the Noise finish). */
  noiseKey: Buffer;
  /** The companion's Signal keys from ClientPayload.devicePairingData. */
  keys: DeviceKeys;
  /** The companion's OS as its DeviceProps announce (`Mac OS`, `Windows`, …), if decodable. */
  platform?: string;
  refs: string[];
  /** When the pair-device iq was sent, ms since the epoch (refs expire per refExpiresAt). */
  issuedAt: number;
}

/** Result of a successful scan: the new device's JIDs. */
export interface LinkResult {
  jid: string;
  lid: string;
  device: number;
}

/** The parts of a QR string. Throws ModelError 400 naming the rule when the string is not a pairing QR. */
export function parsePairingCode(code: string): {
  ref: string;
  noiseKey: Buffer;
  identityKey: Buffer;
  advSecret: Buffer;
} {
  const body = code.includes('#') ? code.slice(code.indexOf('#') + 1) : code;
  const [ref, noise, identity, adv] = body.split(',');
  if (!ref || !noise || !identity || !adv) {
    throw new ModelError(
      400,
      'code must be the QR string: "<ref>,<noise key>,<identity key>,<adv secret>,<platform>"',
    );
  }
  return {
    ref,
    noiseKey: Buffer.from(noise, 'base64'),
    identityKey: Buffer.from(identity, 'base64'),
    advSecret: Buffer.from(adv, 'base64'),
  };
}

/** Registration sockets by ref, and the scan that links them. */
export class Pairing {
  private readonly byRef = new Map<string, PendingRegistration>();
  /** Pairing by a code typed on the phone instead of a QR scan (link-code.ts). */
  readonly linkCodes: LinkCodes;

  constructor(private readonly accounts: Accounts) {
    this.linkCodes = new LinkCodes(this, accounts);
  }

  /** Issues refs for a registration socket and sends it the pair-device iq. */
  start(pending: Omit<PendingRegistration, 'refs' | 'issuedAt'>): PendingRegistration {
    const refs = Array.from({ length: REFS_PER_PAIRING }, () => `2@${randomBytes(36).toString('base64')}`);
    const registration: PendingRegistration = { ...pending, refs, issuedAt: Date.now() };
    for (const ref of refs) this.byRef.set(ref, registration);
    pending.connection.send({
      tag: 'iq',
      attrs: { from: SERVER_JID, type: 'set', id: pending.connection.stanzaId(), xmlns: 'md' },
      content: [
        {
          tag: 'pair-device',
          attrs: {},
          content: refs.map((ref) => ({ tag: 'ref', attrs: {}, content: Buffer.from(ref) })),
        },
      ],
    });
    return registration;
  }

  /** Forgets a registration (its socket closed or it was linked), and any link-code request it made. */
  end(registration: PendingRegistration): void {
    for (const ref of registration.refs) this.byRef.delete(ref);
    this.linkCodes.end(registration);
  }

  /**
   * The phone of `phone` scans `code`. Resolves when the companion countersigned the identity and was told to
   * restart (515). Throws ModelError: 400 malformed code, 404 unknown user, unknown ref (its socket closed)
   * or a ref whose turn on the QR schedule is over (refExpiresAt), 409 unregistered number, keys in the code
   * not matching the registration, or the companion refusing the identity.
   */
  async scan(code: string, phone: string): Promise<LinkResult> {
    const parsed = parsePairingCode(code);
    const user = this.accounts.require(phone, 'phone');
    if (!user.registered)
      throw new ModelError(409, `phone: ${phone} is not registered, it cannot link devices`);
    const registration = this.byRef.get(parsed.ref);
    if (!registration)
      throw new ModelError(404, 'code: no socket is waiting for this QR code (expired or closed)');
    if (Date.now() >= refExpiresAt(registration.issuedAt, registration.refs.indexOf(parsed.ref)))
      throw new ModelError(404, 'code: this QR code expired, scan the one the companion shows now');
    if (
      !registration.noiseKey.equals(parsed.noiseKey) ||
      !registration.keys.identity.equals(parsed.identityKey)
    ) {
      throw new ModelError(409, 'code: the keys in the QR code are not those of the socket that shows it');
    }
    return this.link(registration, user, parsed.advSecret);
  }

  /**
   * Links the companion of `registration` to `user` once the phone knows the ADV secret it shares with the
   * companion (from the QR code, or derived in a link-code exchange): sends `pair-success`, checks the
   * countersignature, restarts the companion's stream (515). Throws ModelError 409 (field `code`) when the
   * companion refuses the pairing.
   */
  async link(registration: PendingRegistration, user: User, advSecret: Buffer): Promise<LinkResult> {
    this.end(registration);
    const device = this.accounts.linkCompanion(user, registration);
    try {
      await this.sendPairSuccess(registration.connection, user, device, advSecret);
    } catch (err) {
      device.linked = false;
      throw new ModelError(409, `code: the companion refused the pairing (${(err as Error).message})`);
    }
    registration.connection.streamError(515);
    return { jid: phoneJid(user.phone, device.id), lid: lidJid(user.lid, device.id), device: device.id };
  }

  private async sendPairSuccess(
    connection: Connection,
    user: User,
    device: Device,
    advSecret: Buffer,
  ): Promise<void> {
    const identityKey = device.keys?.identity;
    if (!identityKey) throw new Error('companion has no identity key');
    const details = Buffer.from(
      proto.ADVDeviceIdentity.encode({
        rawId: randomBytes(4).readUInt32BE(),
        timestamp: Math.floor(Date.now() / 1000),
        keyIndex: device.keyIndex,
        accountType: proto.ADVEncryptionType.E2EE,
        deviceType: proto.ADVEncryptionType.E2EE,
      }).finish(),
    );
    const accountSignature = Curve.sign(
      user.accountKey.private,
      Buffer.concat([WA_ADV_ACCOUNT_SIG_PREFIX, details, identityKey]),
    );
    const signed = Buffer.from(
      proto.ADVSignedDeviceIdentity.encode({
        details,
        accountSignatureKey: user.accountKey.public,
        accountSignature,
      }).finish(),
    );
    const hmac = createHmac('sha256', advSecret).update(signed).digest();
    const identityHmac = Buffer.from(
      proto.ADVSignedDeviceIdentityHMAC.encode({ details: signed, hmac }).finish(),
    );
    const pairSuccess: BinaryNode[] = [
      { tag: 'device-identity', attrs: {}, content: identityHmac },
      { tag: 'platform', attrs: { name: 'android' } },
      { tag: 'device', attrs: { jid: phoneJid(user.phone, device.id), lid: lidJid(user.lid, device.id) } },
    ];
    if (user.verifiedName) pairSuccess.push({ tag: 'biz', attrs: { name: user.verifiedName } });
    const reply = await connection.request({
      tag: 'iq',
      attrs: {
        from: SERVER_JID,
        type: 'set',
        id: connection.stanzaId(),
        t: String(Math.floor(Date.now() / 1000)),
      },
      content: [{ tag: 'pair-success', attrs: {}, content: pairSuccess }],
    });
    verifyDeviceSign(reply, details, identityKey, user.accountKey.public);
  }
}

/**
 * Checks the companion's `pair-device-sign`: its ADVSignedDeviceIdentity must carry our details, our account
 * signature and a device signature by the companion's identity key over `6,1 ‖ details ‖ identity ‖ account key`
 * (signal/identity.ts verifyDeviceIdentity, with libsignal's curve). Throws Error naming the failed check.
 */
function verifyDeviceSign(reply: BinaryNode, details: Buffer, identityKey: Buffer, accountKey: Buffer): void {
  if (reply.attrs.type !== 'result') throw new Error(`pair-success answered with type ${reply.attrs.type}`);
  const identityNode = getBinaryNodeChild(getBinaryNodeChild(reply, 'pair-device-sign'), 'device-identity');
  if (!(identityNode?.content instanceof Uint8Array))
    throw new Error('pair-device-sign without device-identity');
  const signed = proto.ADVSignedDeviceIdentity.decode(identityNode.content);
  if (!signed.details || !Buffer.from(signed.details).equals(details))
    throw new Error('countersigned details differ');
  verifyDeviceIdentity(identityNode.content, accountKey, identityKey);
}
