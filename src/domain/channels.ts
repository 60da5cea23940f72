/**
 * WhatsApp channels (the platform's newsletters, JIDs `<digits>@newsletter`) the account follows
 * (docs/decisions/0041-forward-calls-channels.md).
 */
import type { Jid } from './messages.ts';

/** The JID domain of channels. */
export const CHANNEL_DOMAIN = 'newsletter';

/** One channel as the platform describes it. */
export interface Channel {
  /** `<digits>@newsletter`. */
  jid: Jid;
  name: string;
  /** Absent when the channel has none. */
  description?: string;
  /** Followers, when the platform tells. */
  subscribers?: number;
  /** The channel's invite code (the `<code>` of `https://whatsapp.com/channel/<code>`), when the platform tells. */
  invite?: string;
}

/** A channel named by its JID or by an invite code (a link already reduced to its code). */
export type ChannelRef = { jid: Jid } | { invite: string };

/** Channel JIDs: digits, `@newsletter`. */
export const CHANNEL_JID = /^[0-9]{1,40}@newsletter$/;

/** Invite codes: letters and digits, as in `https://whatsapp.com/channel/0029VaZ4…`. */
export const CHANNEL_INVITE_CODE = /^[A-Za-z0-9]{6,64}$/;

/** The link form of an invite (`https://whatsapp.com/channel/<code>`, optionally `www.`, a trailing `/` or query). */
const INVITE_LINK = /^https:\/\/(?:www\.)?whatsapp\.com\/channel\/([A-Za-z0-9]{6,64})\/?(?:\?.*)?$/;

/**
 * The invite code of `invite`, a code or a channel link; null when it is neither.
 */
export function channelInviteCode(invite: string): string | null {
  const trimmed = invite.trim();
  if (CHANNEL_INVITE_CODE.test(trimmed)) return trimmed;
  return INVITE_LINK.exec(trimmed)?.[1] ?? null;
}
