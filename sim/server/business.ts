/**
 * The verified business name as the platform hands it out: a `VerifiedNameCertificate` (WAProto) whose
 * `details` carry `verifiedName`, in a `<verified_name>` node. Baileys reads it from message stanzas
 * (Utils/decode-wa-message.js decryptMessageNode → `verifiedBizName`); clients asking usync's `business`
 * protocol (`<business><verified_name/></business>`, as WhatsApp Web's contact lookup does) read it from the
 * answer's `<business><verified_name>`. The signature is random bytes: Baileys does not check it.
 *
 * A user with a verified name is a business account: the `w:biz` `business_profile` query (Baileys
 * `getBusinessProfile`, Socket/chats.js) answers its profile, and nothing for anyone else.
 */
import { randomBytes } from 'node:crypto';
import { type BinaryNode, getBinaryNodeChild, getBinaryNodeChildren, proto } from 'baileys';
import type { Accounts, User } from '../model/accounts.ts';

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

/**
 * Answers a `w:biz` get: `<business_profile>` with one `<profile jid>` (its `<description>`, the user's about text)
 * per asked JID whose user is a registered business account (a verified name); the rest are left out, which Baileys
 * reads as "no business profile".
 */
export function businessProfileAnswer(iq: BinaryNode, accounts: Accounts): BinaryNode[] | undefined {
  const query = getBinaryNodeChild(iq, 'business_profile');
  if (!query) return undefined;
  const profiles = getBinaryNodeChildren(query, 'profile').flatMap(({ attrs }) => {
    const user = accounts.resolve(attrs.jid ?? '')?.user;
    if (!user?.registered || !user.verifiedName) return [];
    return [
      {
        tag: 'profile',
        attrs: { jid: attrs.jid ?? '' },
        content: [{ tag: 'description', attrs: {}, content: Buffer.from(user.about ?? '') }],
      },
    ];
  });
  return [{ tag: 'business_profile', attrs: { v: query.attrs.v ?? '244' }, content: profiles }];
}
