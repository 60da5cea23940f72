/**
 * The verified business name as the platform hands it out: a `VerifiedNameCertificate` (WAProto) whose
 * `details` carry `verifiedName`, in a `<verified_name>` node. Baileys reads it from message stanzas
 * (Utils/decode-wa-message.js decryptMessageNode → `verifiedBizName`); clients asking usync's `business`
 * protocol (`<business><verified_name/></business>`, as WhatsApp Web's contact lookup does) read it from the
 * answer's `<business><verified_name>`. The signature is random bytes: Baileys does not check it.
 */
import { randomBytes } from 'node:crypto';
import { type BinaryNode, proto } from 'baileys';
import type { User } from '../model/accounts.ts';

/** Issuer the platform names in verified-name certificates of business accounts. */
const ISSUER = 'smb:wa';

/** The encoded certificate of `verifiedName`; `serial` is the certificate's serial number. */
export function verifiedNameCertificate(verifiedName: string, serial: number): Uint8Array {
  const details = proto.VerifiedNameCertificate.Details.encode({
    serial,
    issuer: ISSUER,
    verifiedName,
  }).finish();
  return proto.VerifiedNameCertificate.encode({ details, signature: randomBytes(64) }).finish();
}

/** `<verified_name>` carrying the user's certificate; undefined for a user without a verified name. */
export function verifiedNameNode(user: User | undefined): BinaryNode | undefined {
  if (!user?.registered || !user.verifiedName) return undefined;
  return {
    tag: 'verified_name',
    attrs: {},
    content: verifiedNameCertificate(user.verifiedName, Number(user.lid.slice(-9))),
  };
}

/** The usync `business` protocol answer for one user: `<business>` with `<verified_name>` when it has one. */
export function businessNode(user: User | undefined): BinaryNode {
  const verified = verifiedNameNode(user);
  return verified ? { tag: 'business', attrs: {}, content: [verified] } : { tag: 'business', attrs: {} };
}
