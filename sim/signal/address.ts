/**
 * Signal protocol addresses of platform devices, the way Baileys 7 derives them (lib/Signal/libsignal.js
 * jidToSignalProtocolAddress and signalStorage.resolveLIDSignalAddress):
 * - a device JID `<user>[:<device>]@<server>` becomes the libsignal address `<user>[_<domainType>].<device>`,
 *   domainType 0 for `s.whatsapp.net` (no suffix), 1 for `lid`, 128 for `hosted`, 129 for `hosted.lid`;
 * - Baileys stores every session under the LID address whenever it knows the PN→LID mapping of the user (its
 *   storage rewrites PN addresses to LID ones), and asks key fetches by LID. It decrypts from the stanza's
 *   sender mapped to LID when known (decode-wa-message.js getDecryptionJid) and encrypts to PN or LID JIDs,
 *   both resolving to the same LID-keyed session.
 *
 * The address never enters the Signal cryptography (libsignal MACs over the two identity keys only), it only
 * names the stored session. The simulated side mirrors Baileys: it keys sessions by the LID address when the
 * simulator knows the account's LID (it always does for its own accounts), so a session set up by a pkmsg
 * addressed by PN is found again when the next message is addressed by LID, and the reverse.
 */
import { jidDecode } from 'baileys';
import { ProtocolAddress } from 'libsignal';

/** Libsignal addressing domains of Baileys' WAJIDDomains (WABinary/jid-utils.js). */
const DOMAIN_PN = 0;
const DOMAIN_LID = 1;
const DOMAIN_HOSTED = 128;
const DOMAIN_HOSTED_LID = 129;

/** Maps a PN user JID (`<phone>@s.whatsapp.net`) to that user's LID user part (digits), when known. */
export type LidLookup = (phone: string) => string | undefined;

/** A JID that cannot name a Signal device (no user part, or device 99 outside the hosted domains). */
export class AddressError extends Error {
  override readonly name = 'AddressError';
}

/**
 * The libsignal address of a device JID, as Baileys' jidToSignalProtocolAddress computes it: `15551234567.0`
 * for `15551234567@s.whatsapp.net`, `8765_1.3` for `8765:3@lid`.
 * @throws AddressError for a JID without user part or a non-hosted device 99 (Baileys refuses those too).
 */
export function signalAddress(jid: string): ProtocolAddress {
  const decoded = jidDecode(jid);
  if (!decoded?.user) throw new AddressError(`${jid} is not a device JID`);
  const { user, device, domainType, server } = decoded;
  if (device === 99 && server !== 'hosted' && server !== 'hosted.lid') {
    throw new AddressError(`${jid}: device 99 exists only on hosted servers`);
  }
  const domain = domainType ?? DOMAIN_PN;
  return new ProtocolAddress(domain === DOMAIN_PN ? user : `${user}_${domain}`, device ?? 0);
}

/**
 * The address a session with `jid` is stored under: the LID address when `jid` is a PN JID whose user has a
 * LID (`lidOf`), otherwise {@link signalAddress}. Mirrors Baileys' resolveLIDSignalAddress.
 * @throws AddressError as {@link signalAddress}.
 */
export function sessionAddress(jid: string, lidOf?: LidLookup): ProtocolAddress {
  const address = signalAddress(jid);
  const decoded = jidDecode(jid);
  const domain = decoded?.domainType ?? DOMAIN_PN;
  if (!lidOf || !decoded || (domain !== DOMAIN_PN && domain !== DOMAIN_HOSTED)) return address;
  const lid = lidOf(decoded.user);
  if (!lid) return address;
  const lidDomain = domain === DOMAIN_HOSTED ? DOMAIN_HOSTED_LID : DOMAIN_LID;
  return new ProtocolAddress(`${lid}_${lidDomain}`, address.deviceId);
}

export { DOMAIN_LID, DOMAIN_PN };
