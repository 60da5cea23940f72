/**
 * The account's own settings as Baileys 7 changes and reads them (Socket/chats.js), answered from the simulated
 * account's state (docs/simulator.md, Profile, privacy and blocklist):
 * - `privacy` get/set: `<privacy>` of `<category name value>` (fetchPrivacySettings, privacyQuery); a set names one
 *   category, whose value must be one the platform knows for it (else 400 bad-request).
 * - `blocklist` get/set: `<list>` of `<item jid>` (fetchBlocklist); a set carries `<item action="block|unblock"
 *   jid="<lid>" pn_jid="<phone jid>">` (updateBlockStatus). Items of the list name each blocked user by LID, as
 *   the platform does since the LID migration.
 * - `status` set: the about text as the `<status>` child's bytes (updateProfileStatus).
 * - `w:profile:picture` set without `target`: the account's own picture, JPEG bytes in `<picture type="image">`
 *   (updateProfilePicture); without a `<picture>` child the picture is removed (removeProfilePicture). A set with a
 *   `target` (a group's picture) is not modelled: 501.
 * - `w:sync:app:state` set: app state patches (server/app-state.ts); `archive`, `pin_v1`, `mute`, `markChatAsRead`
 *   and `star` mutations change the account's chat state (chatModify; {@link applyChatMutation}).
 */
import { type BinaryNode, getBinaryNodeChild, getBinaryNodeChildren, type proto } from 'baileys';
import type { Accounts, SimChatState, User } from '../model/accounts.ts';
import type { IqAnswer } from './iq.ts';

/** The values the platform accepts per privacy category (Baileys Types/Chat.d.ts). */
export const PRIVACY_CATEGORY_VALUES: Readonly<Record<string, readonly string[]>> = {
  last: ['all', 'contacts', 'contact_blacklist', 'none'],
  online: ['all', 'match_last_seen'],
  profile: ['all', 'contacts', 'contact_blacklist', 'none'],
  status: ['all', 'contacts', 'contact_blacklist', 'none'],
  groupadd: ['all', 'contacts', 'contact_blacklist'],
  readreceipts: ['all', 'none'],
  calladd: ['all', 'known'],
  messages: ['all', 'contacts'],
};

/** Privacy settings of a new account, the platform's defaults. */
export const DEFAULT_PRIVACY: Readonly<Record<string, string>> = {
  last: 'all',
  online: 'all',
  profile: 'all',
  status: 'contacts',
  groupadd: 'all',
  readreceipts: 'all',
  calladd: 'all',
};

/** Host of the profile picture URLs the simulator gives out for pictures accounts set themselves (not served). */
export const OWN_PICTURE_BASE = 'https://pps.sim.example/v/t61/';

const badRequest = (text: string): IqAnswer => ({ error: { code: 400, text } });
let lastPictureId = Math.floor(Date.now() / 1000);

/** The account's privacy settings, every category. */
export function privacyOf(user: User): Record<string, string> {
  return { ...DEFAULT_PRIVACY, ...user.privacy };
}

/** Answers a `privacy` get or set. */
export function privacyIq(iq: BinaryNode, user: User): IqAnswer {
  const privacy = getBinaryNodeChild(iq, 'privacy');
  if (iq.attrs.type === 'get') {
    const content = Object.entries(privacyOf(user)).map(([name, value]) => ({
      tag: 'category',
      attrs: { name, value },
    }));
    return { content: [{ tag: 'privacy', attrs: {}, content }] };
  }
  const categories = getBinaryNodeChildren(privacy, 'category');
  if (categories.length === 0) return badRequest('category missing');
  for (const { attrs } of categories) {
    const allowed = PRIVACY_CATEGORY_VALUES[attrs.name ?? ''];
    if (!allowed?.includes(attrs.value ?? '')) return badRequest('bad-request');
  }
  const next = { ...user.privacy };
  for (const { attrs } of categories) next[attrs.name ?? ''] = attrs.value ?? '';
  user.privacy = next;
  return {};
}

/** Answers a `blocklist` get (the list by LID JID) or set (block/unblock one user named by LID or phone JID). */
export function blocklistIq(iq: BinaryNode, user: User, accounts: Accounts): IqAnswer {
  if (iq.attrs.type === 'get') {
    const items = (user.blocked ?? []).flatMap((phone) => {
      const blocked = accounts.get(phone);
      return blocked ? [{ tag: 'item', attrs: { jid: `${blocked.lid}@lid` } }] : [];
    });
    return { content: [{ tag: 'list', attrs: {}, content: items }] };
  }
  const item = getBinaryNodeChild(iq, 'item');
  const action = item?.attrs.action;
  if (!item || (action !== 'block' && action !== 'unblock')) return badRequest('bad-request');
  const target = accounts.resolve(item.attrs.jid ?? '') ?? accounts.resolve(item.attrs.pn_jid ?? '');
  if (!target?.user.registered) return { error: { code: 404, text: 'item-not-found' } };
  if (target.user === user) return badRequest('bad-request');
  const phone = target.user.phone;
  const current = (user.blocked ?? []).filter((p) => p !== phone);
  user.blocked = action === 'block' ? [...current, phone] : current;
  return {};
}

/** Answers a `status` set: the account's about text. */
export function statusIq(iq: BinaryNode, user: User): IqAnswer {
  const status = getBinaryNodeChild(iq, 'status');
  if (iq.attrs.type !== 'set' || !status) return badRequest('bad-request');
  const content = status.content;
  const text =
    typeof content === 'string'
      ? content
      : content instanceof Uint8Array
        ? Buffer.from(content).toString('utf8')
        : '';
  user.about = text;
  return {};
}

/** Answers a `w:profile:picture` set for the account itself: stores the picture, or removes it. */
export function ownPictureIq(iq: BinaryNode, user: User): IqAnswer {
  if (iq.attrs.target) return { error: { code: 501, text: 'feature-not-implemented' } };
  const picture = getBinaryNodeChild(iq, 'picture');
  if (!picture) {
    delete user.picture;
    delete user.avatar;
    return {};
  }
  const content = picture.content;
  if (!(content instanceof Uint8Array) || content.length === 0) return badRequest('bad-request');
  const id = String(++lastPictureId);
  user.picture = Buffer.from(content);
  user.avatar = { url: `${OWN_PICTURE_BASE}${user.lid}.jpg?id=${id}`, id };
  return { content: [{ tag: 'picture', attrs: { id } }] };
}

/** A protobuf int64 (a number or a Long) as a number. */
function int64(value: number | { toString(): string } | null | undefined): number | null {
  if (value === null || value === undefined) return null;
  return typeof value === 'number' ? value : Number(value.toString());
}

/**
 * Applies one decrypted chat mutation to `user`'s chat state, by its index (Baileys Utils/chat-utils.js
 * `chatModificationToAppPatch`): `[archive, jid]` (`archiveChatAction.archived`; archiving unpins, as the phones
 * do), `[pin_v1, jid]` (`pinAction.pinned`), `[mute, jid]` (`muteAction.muted`, `muteEndTimestamp` epoch ms or -1),
 * `[markChatAsRead, jid]` (`markChatAsReadAction.read`: false marks the chat unread) and
 * `[star, jid, id, fromMe, participant]` (participant `0` for a 1:1 chat) (`starAction.starred`). Anything else is ignored.
 */
export function applyChatMutation(user: User, index: readonly string[], value: proto.ISyncActionValue): void {
  const [kind, jid] = index;
  if (!jid) return;
  if (kind === 'star') {
    const id = index[2] ?? '';
    const fromMe = index[3] === '1';
    const others = (user.starred ?? []).filter((s) => !(s.chat === jid && s.id === id));
    user.starred = value.starAction?.starred ? [...others, { chat: jid, id, fromMe }] : others;
    return;
  }
  const current: SimChatState = user.chats?.[jid] ?? {
    archived: false,
    pinned: false,
    mutedUntil: null,
    markedUnread: false,
  };
  const next = { ...current };
  if (kind === 'archive') {
    next.archived = value.archiveChatAction?.archived === true;
    if (next.archived) next.pinned = false;
  } else if (kind === 'pin_v1') {
    next.pinned = value.pinAction?.pinned === true;
  } else if (kind === 'mute') {
    next.mutedUntil = value.muteAction?.muted ? (int64(value.muteAction.muteEndTimestamp) ?? -1) : null;
  } else if (kind === 'markChatAsRead') {
    next.markedUnread = value.markChatAsReadAction?.read === false;
  } else {
    return;
  }
  user.chats = { ...user.chats, [jid]: next };
}
