import { jidDecode } from 'baileys';
import { DomainError, errors } from '../../domain/errors.ts';
import { userJid } from '../../domain/messages.ts';
import {
  type AccountProfile,
  PRIVACY_CATEGORIES,
  type PrivacyChange,
  type PrivacySettings,
  type ProfileChange,
  privacyFromCategories,
} from '../../domain/profile.ts';
import { avatarOf, checkPhones, userInfo } from './contacts.ts';
import { isLidLike } from './jid.ts';
import type { SocketLike } from './socket.ts';

/**
 * The account's own profile, privacy settings and blocklist through Baileys 7 (Socket/chats.js;
 * docs/decisions/0039-profile-privacy-blocklist.md). Errors are Baileys' (the caller maps them with
 * `mapPlatformErrors`) except the DomainErrors named per function.
 */

/** Who the account is: its phone (digits) and its push name as the credentials hold it. */
export interface OwnAccount {
  phone: string;
  name: string;
}

/**
 * The profile as the platform shows it: the push name from the credentials (the platform never answers it back to
 * its own account), the about text (usync `status`), and the picture URL (`w:profile:picture`, null when none).
 */
export async function readProfile(sock: SocketLike, me: OwnAccount): Promise<AccountProfile> {
  const [info] = await userInfo(sock, [me.phone]);
  const avatar = await avatarOf(sock, userJid(me.phone));
  return { name: me.name, about: info?.status ?? '', pictureUrl: avatar?.url ?? null };
}

/**
 * Applies `change`: the name as an app state `setting_pushName` change (updateProfileName; `rename` then records it
 * in the credentials), the about text (updateProfileStatus, a `status` iq), the picture (updateProfilePicture: scaled
 * to 640×640 JPEG, a `w:profile:picture` set iq).
 */
export async function applyProfile(
  sock: SocketLike,
  me: OwnAccount,
  change: ProfileChange,
  rename: (name: string) => Promise<void>,
): Promise<void> {
  if (change.name !== undefined) {
    await sock.updateProfileName(change.name);
    await rename(change.name);
  }
  if (change.about !== undefined) await sock.updateProfileStatus(change.about);
  if (change.picture !== undefined) await sock.updateProfilePicture(userJid(me.phone), change.picture.data);
}

/** The privacy settings, read fresh from the platform (fetchPrivacySettings with `force`). */
export async function readPrivacy(sock: SocketLike): Promise<PrivacySettings> {
  return privacyFromCategories(await sock.fetchPrivacySettings(true));
}

/** Changes each given setting with its own privacy iq, in the order of {@link PRIVACY_CATEGORIES}. */
export async function applyPrivacy(sock: SocketLike, change: PrivacyChange): Promise<void> {
  for (const field of Object.keys(PRIVACY_CATEGORIES) as (keyof PrivacySettings)[]) {
    switch (field) {
      case 'lastSeen':
        if (change.lastSeen) await sock.updateLastSeenPrivacy(change.lastSeen);
        break;
      case 'online':
        if (change.online) await sock.updateOnlinePrivacy(change.online);
        break;
      case 'profilePicture':
        if (change.profilePicture) await sock.updateProfilePicturePrivacy(change.profilePicture);
        break;
      case 'about':
        if (change.about) await sock.updateStatusPrivacy(change.about);
        break;
      case 'groupAdd':
        if (change.groupAdd) await sock.updateGroupsAddPrivacy(change.groupAdd);
        break;
      case 'readReceipts':
        if (change.readReceipts) await sock.updateReadReceiptsPrivacy(change.readReceipts);
        break;
    }
  }
}

/**
 * The blocked users' phones, ascending. The platform names them by LID; each is mapped to its phone through Baileys'
 * LID mapping store, and one it cannot map is left out (parley answers phone numbers only).
 */
export async function readBlocklist(sock: SocketLike): Promise<string[]> {
  const jids = (await sock.fetchBlocklist()).filter((jid): jid is string => typeof jid === 'string');
  const phones = new Set<string>();
  for (const jid of jids) {
    const pn = isLidLike(jid) ? await sock.signalRepository.lidMapping.getPNForLID(jid) : jid;
    const phone = pn ? jidDecode(pn)?.user : undefined;
    if (phone) phones.add(phone);
  }
  return [...phones].sort();
}

/**
 * Blocks or unblocks `phone` (updateBlockStatus, which names the user by LID and phone).
 * @throws DomainError invalid for the account's own number; not_registered when the number is not on the platform.
 */
export async function applyBlock(
  sock: SocketLike,
  me: OwnAccount,
  phone: string,
  action: 'block' | 'unblock',
): Promise<void> {
  if (phone === me.phone) throw errors.badRequest('phone must be another user than this instance');
  const [check] = await checkPhones(sock, [phone]);
  if (!check?.isInPlatform) {
    throw new DomainError('not_registered', `phone ${phone} is not registered on the platform`);
  }
  await sock.updateBlockStatus(userJid(phone), action);
}
