/**
 * Pairing by a code typed on the phone, as the platform runs it for Baileys' `requestPairingCode`
 * (Socket/socket.js companion_hello, Socket/messages-recv.js `link_code_companion_reg` notification and
 * companion_finish):
 *
 * 1. The companion (a registration socket) sends an iq `md` `<link_code_companion_reg stage="companion_hello"
 *    jid="<phone>@s.whatsapp.net">` with its ephemeral public key wrapped under the code:
 *    `salt(32) ‖ iv(16) ‖ AES-256-CTR(PBKDF2-SHA256(code, salt, 131072 iterations, 32 bytes), iv, pub)`, and its
 *    Noise key. The server answers with a `link_code_pairing_ref` and keeps the request for that phone.
 * 2. The user types the code on the phone (POST /control/pairing-code): the phone unwraps the companion's
 *    ephemeral key with it, makes its own ephemeral pair, and sends the companion a notification
 *    `<link_code_companion_reg stage="primary_hello">` with the ref, its identity key (the account key) and its
 *    ephemeral key wrapped the same way.
 * 3. The companion answers with an iq `companion_finish`: `salt(32) ‖ iv(12) ‖ AES-256-GCM(key bundle)`, under
 *    HKDF-SHA256(ECDH(ephemerals), salt, "link_code_pairing_key_bundle_encryption_key"), where the bundle is
 *    `companion identity ‖ primary identity ‖ random(32)`. The phone decrypts it (a wrong code fails here: the
 *    ephemeral keys were unwrapped with another key), and both derive the ADV secret as
 *    HKDF-SHA256(ECDH(ephemerals) ‖ ECDH(identities) ‖ random, "adv_secret"). The device is then linked as
 *    after a QR scan (pairing.ts `link`).
 */
import { createCipheriv, createDecipheriv, hkdfSync, pbkdf2, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { type BinaryNode, Curve, getBinaryNodeChild, getBinaryNodeChildBuffer } from 'baileys';
import { type Accounts, ModelError, SERVER_JID } from '../model/accounts.ts';
import type { LinkResult, Pairing, PendingRegistration } from './pairing.ts';

const pbkdf2Async = promisify(pbkdf2);

/** How long the phone waits for the companion's companion_finish after its primary_hello, ms. */
export const FINISH_TIMEOUT_MS = 10_000;

/** A companion's request to be linked by code. */
interface LinkCodeRequest {
  registration: PendingRegistration;
  /** Digits of the account the companion wants to link to. */
  phone: string;
  ref: string;
  /** `salt ‖ iv ‖ ciphertext` of the companion's ephemeral public key. */
  wrappedCompanionKey: Buffer;
  /** Set while a phone waits for this companion's companion_finish. */
  awaitingFinish?: (finish: BinaryNode) => void;
}

/** The code as a user types it: upper case, spaces and dashes ignored (the platform shows `ABCD-1234`). */
export function normalizeCode(code: string): string {
  return code.replace(/[\s-]/g, '').toUpperCase();
}

/** PBKDF2-SHA256 of the code (Baileys Utils/crypto.js derivePairingCodeKey): 2 << 16 iterations, 32 bytes. */
function codeKey(code: string, salt: Buffer): Promise<Buffer> {
  return pbkdf2Async(Buffer.from(code, 'utf8'), salt, 2 << 16, 32, 'sha256');
}

async function unwrapKey(wrapped: Buffer, code: string): Promise<Buffer> {
  const key = await codeKey(code, wrapped.subarray(0, 32));
  const decipher = createDecipheriv('aes-256-ctr', key, wrapped.subarray(32, 48));
  return Buffer.concat([decipher.update(wrapped.subarray(48, 80)), decipher.final()]);
}

async function wrapKey(publicKey: Buffer, code: string): Promise<Buffer> {
  const salt = randomBytes(32);
  const iv = randomBytes(16);
  const cipher = createCipheriv('aes-256-ctr', await codeKey(code, salt), iv);
  return Buffer.concat([salt, iv, cipher.update(publicKey), cipher.final()]);
}

function hkdf(key: Buffer, info: string, salt = Buffer.alloc(0)): Buffer {
  return Buffer.from(hkdfSync('sha256', key, salt, info, 32));
}

function iqResult(iq: BinaryNode, content?: BinaryNode[]): BinaryNode {
  const node: BinaryNode = { tag: 'iq', attrs: { from: SERVER_JID, id: iq.attrs.id ?? '', type: 'result' } };
  if (content) node.content = content;
  return node;
}

function iqError(iq: BinaryNode, code: number, text: string): BinaryNode {
  return {
    tag: 'iq',
    attrs: { from: SERVER_JID, id: iq.attrs.id ?? '', type: 'error' },
    content: [{ tag: 'error', attrs: { code: String(code), text } }],
  };
}

/** Link-code requests of registration sockets, and the phone's side of the exchange. */
export class LinkCodes {
  private readonly requests = new Map<PendingRegistration, LinkCodeRequest>();

  constructor(
    private readonly pairing: Pairing,
    private readonly accounts: Accounts,
  ) {}

  /** Forgets the request of a registration (its socket closed or it was linked). */
  end(registration: PendingRegistration): void {
    this.requests.delete(registration);
  }

  /**
   * Handles an iq `md` `<link_code_companion_reg>` from a registration socket (companion_hello or
   * companion_finish) and returns the answer to send; undefined when the iq is not one of those.
   */
  onCompanionIq(registration: PendingRegistration, iq: BinaryNode): BinaryNode | undefined {
    const reg = getBinaryNodeChild(iq, 'link_code_companion_reg');
    if (iq.attrs.xmlns !== 'md' || !reg) return undefined;
    if (reg.attrs.stage === 'companion_hello') {
      const wrapped = getBinaryNodeChildBuffer(reg, 'link_code_pairing_wrapped_companion_ephemeral_pub');
      const noiseKey = getBinaryNodeChildBuffer(reg, 'companion_server_auth_key_pub');
      const phone = /^([0-9]+)@s\.whatsapp\.net$/.exec(reg.attrs.jid ?? '')?.[1];
      if (wrapped?.length !== 80 || !phone)
        return iqError(iq, 400, 'companion_hello needs jid and an 80-byte wrapped ephemeral key');
      if (!noiseKey || !registration.noiseKey.equals(Buffer.from(noiseKey)))
        return iqError(iq, 400, 'companion_server_auth_key_pub is not the Noise key of this socket');
      const ref = randomBytes(16).toString('base64');
      this.requests.set(registration, {
        registration,
        phone,
        ref,
        wrappedCompanionKey: Buffer.from(wrapped),
      });
      return iqResult(iq, [
        {
          tag: 'link_code_companion_reg',
          attrs: {},
          content: [{ tag: 'link_code_pairing_ref', attrs: {}, content: Buffer.from(ref) }],
        },
      ]);
    }
    if (reg.attrs.stage === 'companion_finish') {
      const request = this.requests.get(registration);
      const ref = getBinaryNodeChildBuffer(reg, 'link_code_pairing_ref');
      if (!request?.awaitingFinish || !ref || Buffer.from(ref).toString() !== request.ref)
        return iqError(iq, 404, 'no code entered on a phone for this companion');
      request.awaitingFinish(reg);
      return iqResult(iq);
    }
    return iqError(iq, 400, `unknown link_code_companion_reg stage ${reg.attrs.stage}`);
  }

  /**
   * The user of `phone` types `code` on the phone. Resolves once the companion is linked (as a QR scan does).
   * Throws ModelError: 404 unknown user or no companion asked to link to this number by code, 409 unregistered
   * number, a wrong code (the key bundle does not decrypt) or a companion that does not finish in
   * {@link FINISH_TIMEOUT_MS} or refuses the pairing.
   */
  async enter(phone: string, typed: string): Promise<LinkResult> {
    const user = this.accounts.require(phone, 'phone');
    if (!user.registered)
      throw new ModelError(409, `phone: ${phone} is not registered, it cannot link devices`);
    const request = [...this.requests.values()].reverse().find((r) => r.phone === phone);
    if (!request)
      throw new ModelError(
        404,
        `phone: no companion is waiting to link to ${phone} by code (expired or closed)`,
      );
    if (request.awaitingFinish)
      throw new ModelError(409, 'code: a code is already being checked for this companion');
    const code = normalizeCode(typed);
    const companionEphemeral = await unwrapKey(request.wrappedCompanionKey, code);
    const primaryEphemeral = Curve.generateKeyPair();
    const finish = new Promise<BinaryNode>((resolve, reject) => {
      const timer = setTimeout(() => {
        delete request.awaitingFinish;
        reject(new ModelError(409, 'code: the companion did not finish the pairing'));
      }, FINISH_TIMEOUT_MS);
      request.awaitingFinish = (node) => {
        clearTimeout(timer);
        delete request.awaitingFinish;
        resolve(node);
      };
    });
    const { connection } = request.registration;
    connection.send({
      tag: 'notification',
      attrs: {
        from: SERVER_JID,
        id: connection.stanzaId(),
        type: 'link_code_companion_reg',
        t: String(Math.floor(Date.now() / 1000)),
      },
      content: [
        {
          tag: 'link_code_companion_reg',
          attrs: { stage: 'primary_hello' },
          content: [
            { tag: 'link_code_pairing_ref', attrs: {}, content: Buffer.from(request.ref) },
            { tag: 'primary_identity_pub', attrs: {}, content: user.accountKey.public },
            {
              tag: 'link_code_pairing_wrapped_primary_ephemeral_pub',
              attrs: {},
              content: await wrapKey(Buffer.from(primaryEphemeral.public), code),
            },
          ],
        },
      ],
    });
    const reg = await finish;
    const bundle = getBinaryNodeChildBuffer(reg, 'link_code_pairing_wrapped_key_bundle');
    const companionIdentity = getBinaryNodeChildBuffer(reg, 'companion_identity_public');
    if (!bundle || bundle.length < 32 + 12 + 16 || !companionIdentity)
      throw new ModelError(409, 'code: companion_finish without a key bundle or identity');
    const shared = Buffer.from(Curve.sharedKey(primaryEphemeral.private, companionEphemeral));
    const wrapped = Buffer.from(bundle);
    let payload: Buffer;
    try {
      const key = hkdf(shared, 'link_code_pairing_key_bundle_encryption_key', wrapped.subarray(0, 32));
      const decipher = createDecipheriv('aes-256-gcm', key, wrapped.subarray(32, 44));
      decipher.setAuthTag(wrapped.subarray(wrapped.length - 16));
      payload = Buffer.concat([decipher.update(wrapped.subarray(44, wrapped.length - 16)), decipher.final()]);
    } catch {
      throw new ModelError(409, 'code: wrong code (the companion key bundle does not decrypt with it)');
    }
    const bundleIdentity = payload.subarray(0, 32);
    if (
      payload.length !== 96 ||
      !bundleIdentity.equals(Buffer.from(companionIdentity)) ||
      !bundleIdentity.equals(request.registration.keys.identity) ||
      !payload.subarray(32, 64).equals(user.accountKey.public)
    )
      throw new ModelError(409, 'code: the key bundle does not carry the identities of this pairing');
    const identityShared = Buffer.from(Curve.sharedKey(user.accountKey.private, bundleIdentity));
    const advSecret = hkdf(Buffer.concat([shared, identityShared, payload.subarray(64, 96)]), 'adv_secret');
    return this.pairing.link(request.registration, user, advSecret);
  }
}
