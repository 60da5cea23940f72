import {
  type BaileysEventMap,
  type BinaryNode,
  getContentType,
  isJidGroup,
  isJidStatusBroadcast,
  type MessageUserReceiptUpdate,
  normalizeMessageContent,
  proto,
  toNumber,
  type WAMessage,
  type WAMessageUpdate,
} from 'baileys';
import type {
  EngineEvent,
  EngineMessage,
  HistoryChat,
  Jid,
  MessageContent,
  MessageSource,
} from '../../domain/messages.ts';
import { extended } from '../../domain/objects.ts';
import { interactiveReplyOf } from './interactive-replies.ts';
import type { JidResolver } from './jid.ts';
import { mediaReferenceOf } from './media-download.ts';

/** Who the account is, for deciding `isFromMe` and the sender of own messages. */
export interface Identity {
  /** Own phone JID without device (`<digits>@s.whatsapp.net`); null before pairing. */
  phoneJid: Jid | null;
  /** Own LID without device (`<digits>@lid`); null when unknown. */
  lid: string | null;
  /** Own display name ('' when unknown). */
  pushName: string;
}

/** What the mapping functions need: the JID resolver and the account's identity. */
export interface MappingContext {
  resolver: JidResolver;
  me(): Identity;
}

/**
 * A {@link MessageSource} with the flag of docs/decisions/0025-live-engine.md: `lidUnresolved: true` when a JID in it
 * is a LID no mapping could turn into a phone JID (it is then passed as is, `…@lid`). Absent otherwise.
 */
export interface FlaggedSource extends MessageSource {
  lidUnresolved?: true;
}

/** Epoch milliseconds of a Baileys `messageTimestamp` (Unix seconds, number or Long); `fallback` when absent. */
export function timestampMs(value: number | Long | null | undefined, fallback: number): number {
  if (value === null || value === undefined) return fallback;
  const seconds = toNumber(value);
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : fallback;
}

type Long = Parameters<typeof toNumber>[0];

function num(value: number | Long | null | undefined): number | undefined {
  if (value === null || value === undefined) return undefined;
  const n = toNumber(value);
  return Number.isFinite(n) ? n : undefined;
}

function quotedOf(info: proto.IContextInfo | null | undefined): {
  quotedId?: string;
  mentions?: string[];
  forwardingScore?: number;
} {
  return {
    ...(info?.stanzaId ? { quotedId: info.stanzaId } : {}),
    ...(info?.mentionedJid?.length ? { mentions: [...info.mentionedJid] } : {}),
    ...(info?.isForwarded ? { forwardingScore: Math.max(1, info.forwardingScore ?? 1) } : {}),
  };
}

/**
 * The domain content of a platform message (docs/decisions/0018-webhook-events-and-payloads.md `Message` payload, no
 * media bytes): text/extended text, image, video, audio (voice notes included), document (also
 * `documentWithCaption`), sticker, location (and live location), contact card (first of an array), reaction, a
 * reply to an interactive message (buttons, list, template button, flow: interactive-replies.ts); wrappers
 * (ephemeral, view-once, …) are unwrapped with Baileys' `normalizeMessageContent`. Null for protocol-only stanzas
 * (history notifications, revokes, key shares, edits) that are not messages a user sent.
 */
export function toMessageContent(message: proto.IMessage | null | undefined): MessageContent | null {
  const content = normalizeMessageContent(message);
  if (!content) return null;
  const type = getContentType(content);
  if (!type || type === 'protocolMessage') return null;
  if (content.conversation) return { kind: 'text', text: content.conversation };
  const ext = content.extendedTextMessage;
  if (ext) return { kind: 'text', text: ext.text ?? '', ...quotedOf(ext.contextInfo) };
  const media = (
    kind: MessageContent['kind'],
    m: {
      caption?: string | null;
      mimetype?: string | null;
      fileLength?: number | Long | null;
      fileName?: string | null;
      contextInfo?: proto.IContextInfo | null;
    },
  ): MessageContent => {
    const out: MessageContent = { kind, ...quotedOf(m.contextInfo) };
    if (m.caption) out.text = m.caption;
    if (m.mimetype) out.mimetype = m.mimetype;
    const length = num(m.fileLength);
    if (length !== undefined) out.fileLength = length;
    if (m.fileName) out.fileName = m.fileName;
    return out;
  };
  if (content.imageMessage) return media('image', content.imageMessage);
  if (content.videoMessage) return media('video', content.videoMessage);
  if (content.ptvMessage) return media('video', content.ptvMessage);
  if (content.audioMessage)
    return extended(media('audio', content.audioMessage), { ptt: Boolean(content.audioMessage.ptt) });
  if (content.documentMessage) return media('document', content.documentMessage);
  if (content.stickerMessage) return media('sticker', content.stickerMessage);
  const location = content.locationMessage ?? content.liveLocationMessage;
  if (location) {
    const out: MessageContent = { kind: 'location', ...quotedOf(location.contextInfo) };
    if (typeof location.degreesLatitude === 'number') out.latitude = location.degreesLatitude;
    if (typeof location.degreesLongitude === 'number') out.longitude = location.degreesLongitude;
    if ('name' in location && location.name) out.name = location.name;
    if ('address' in location && location.address) out.address = location.address;
    return out;
  }
  const contact = content.contactMessage ?? content.contactsArrayMessage?.contacts?.[0];
  if (contact) {
    const out: MessageContent = { kind: 'contact', ...quotedOf(contact.contextInfo) };
    if (contact.displayName) out.name = contact.displayName;
    if (contact.vcard) out.vcard = contact.vcard;
    return out;
  }
  const poll = content.pollCreationMessage ?? content.pollCreationMessageV2 ?? content.pollCreationMessageV3;
  if (poll) {
    return {
      kind: 'poll',
      text: poll.name ?? '',
      poll: {
        options: (poll.options ?? []).map((option) => option.optionName ?? ''),
        selectableCount: poll.selectableOptionsCount ?? 0,
      },
      ...quotedOf(poll.contextInfo),
    };
  }
  const reaction = content.reactionMessage;
  if (reaction)
    return { kind: 'reaction', reaction: { emoji: reaction.text ?? '', targetId: reaction.key?.id ?? '' } };
  const answer = interactiveReplyOf(content);
  if (answer) {
    const { reply, text, contextInfo } = answer;
    return { kind: 'interactive_reply', text, interactive: reply, ...quotedOf(contextInfo) };
  }
  return { kind: 'other' };
}

/**
 * The source of a message key with every user JID a phone JID (docs/decisions/0025-live-engine.md): the chat from
 * `remoteJid` / `remoteJidAlt` (1:1), the sender from `participant` / `participantAlt` (groups, and
 * `status@broadcast`: the contact who viewed a status, docs/decisions/0044-status-stories.md) or the chat (1:1),
 * the account's own phone JID for own messages. An own JID in `remoteJidAlt` (Baileys fills it from `sender_pn` on
 * own stanzas) is ignored for the chat.
 */
export async function sourceOfKey(
  key: WAMessage['key'],
  ctx: MappingContext,
  fromMe: boolean = Boolean(key.fromMe),
): Promise<FlaggedSource> {
  const me = ctx.me();
  const remote = key.remoteJid ?? '';
  const isGroup = Boolean(isJidGroup(remote));
  const byParticipant = isGroup || Boolean(isJidStatusBroadcast(remote));
  let unresolved = false;
  const resolve = async (jid: string, alt?: string | null) => {
    const r = await ctx.resolver.resolve(jid, alt);
    if (!r.resolved) unresolved = true;
    return r.jid;
  };
  const ownAlt = key.remoteJidAlt && me.phoneJid && sameUser(key.remoteJidAlt, me.phoneJid);
  const chat = byParticipant ? remote : await resolve(remote, ownAlt ? undefined : key.remoteJidAlt);
  let sender: Jid;
  if (fromMe && me.phoneJid) sender = me.phoneJid;
  else if (byParticipant) sender = key.participant ? await resolve(key.participant, key.participantAlt) : '';
  else sender = chat;
  const source: FlaggedSource = { chat, sender, isFromMe: fromMe, isGroup };
  if (unresolved) source.lidUnresolved = true;
  return source;
}

function sameUser(a: string, b: string): boolean {
  return a.split('@')[0]?.split(':')[0] === b.split('@')[0]?.split(':')[0];
}

/**
 * A received (or own, from another device) platform message as an {@link EngineMessage}, its media's download
 * reference included; null when not a message.
 */
export async function toEngineMessage(
  msg: WAMessage,
  ctx: MappingContext,
  now: number,
): Promise<EngineMessage | null> {
  const id = msg.key.id;
  if (!id || !msg.key.remoteJid) return null;
  const content = toMessageContent(msg.message);
  if (!content) return null;
  const download = mediaReferenceOf(msg.message);
  if (download !== undefined) content.download = download;
  if (content.mentions) {
    content.mentions = await Promise.all(
      content.mentions.map(async (jid) => (await ctx.resolver.resolve(jid)).jid),
    );
  }
  const source = await sourceOfKey(msg.key, ctx);
  const pushName = msg.pushName ?? (source.isFromMe ? ctx.me().pushName : '');
  return { id, source, pushName, timestamp: timestampMs(msg.messageTimestamp, now), content };
}

const RECEIPT_STATES: Partial<Record<number, 'delivered' | 'read' | 'played'>> = {
  [proto.WebMessageInfo.Status.DELIVERY_ACK]: 'delivered',
  [proto.WebMessageInfo.Status.READ]: 'read',
  [proto.WebMessageInfo.Status.PLAYED]: 'played',
};

type ReceiptEvent = Extract<EngineEvent, { type: 'receipt' }>;

/**
 * 1:1 receipts (Baileys `messages.update` with `update.status` 3/4/5) as `receipt` events, one per chat, state and
 * direction (docs/decisions/0018-webhook-events-and-payloads.md `ReadReceipt`). `key.fromMe` true means the ids are
 * the account's messages and the peer acknowledged them (`isFromMe: false`, sender = the peer); false means another
 * device of the account read the peer's messages (`isFromMe: true`). Other updates (errors, edits) are ignored.
 */
export async function receiptsFromUpdates(
  updates: readonly WAMessageUpdate[],
  ctx: MappingContext,
  now: number,
): Promise<ReceiptEvent[]> {
  const grouped = new Map<string, ReceiptEvent>();
  for (const { key, update } of updates) {
    const state = typeof update.status === 'number' ? RECEIPT_STATES[update.status] : undefined;
    if (!state || !key.id || !key.remoteJid || isJidGroup(key.remoteJid)) continue;
    const byMe = !key.fromMe;
    const source = await sourceOfKey(extended(key, { participant: null }), ctx, byMe);
    const timestamp = timestampMs(update.messageTimestamp, now);
    addReceipt(grouped, state, source, key.id, timestamp);
  }
  return [...grouped.values()];
}

/**
 * Group receipts (Baileys `message-receipt.update`: one per participant with `receiptTimestamp` = delivered or
 * `readTimestamp` = read; Baileys reports `played` in groups as read) as `receipt` events; the sender is the
 * participant who acknowledged, resolved to a phone JID.
 */
export async function receiptsFromGroupUpdates(
  updates: readonly MessageUserReceiptUpdate[],
  ctx: MappingContext,
  now: number,
): Promise<ReceiptEvent[]> {
  const grouped = new Map<string, ReceiptEvent>();
  for (const { key, receipt } of updates) {
    if (!key.id || !key.remoteJid || !receipt.userJid) continue;
    const state = receipt.playedTimestamp ? 'played' : receipt.readTimestamp ? 'read' : 'delivered';
    const at = receipt.playedTimestamp ?? receipt.readTimestamp ?? receipt.receiptTimestamp;
    const me = ctx.me();
    const byMe =
      Boolean(me.phoneJid && sameUser(receipt.userJid, me.phoneJid)) ||
      Boolean(me.lid && sameUser(receipt.userJid, me.lid));
    const source = await sourceOfKey(extended(key, { participant: receipt.userJid }), ctx, byMe);
    addReceipt(grouped, state, source, key.id, timestampMs(at, now));
  }
  return [...grouped.values()];
}

function addReceipt(
  grouped: Map<string, ReceiptEvent>,
  state: ReceiptEvent['state'],
  source: FlaggedSource,
  id: string,
  timestamp: number,
): void {
  const key = `${state}|${source.chat}|${source.sender}|${source.isFromMe}`;
  const existing = grouped.get(key);
  if (existing) {
    existing.messageIds.push(id);
    existing.timestamp = Math.max(existing.timestamp, timestamp);
  } else {
    grouped.set(key, { type: 'receipt', state, messageIds: [id], source, timestamp });
  }
}

/**
 * A `<chatstate>` stanza (read from the socket's `CB:chatstate` frames, because Baileys' `presence.update` turns
 * `paused` into `available`) as a `presence` event (docs/decisions/0018-webhook-events-and-payloads.md
 * `ChatPresence`): `<composing/>` → composing, `<composing media="audio"/>` → composing with media `audio`
 * (recording), `<paused/>` → paused. Null otherwise.
 */
export async function presenceFromChatstate(
  node: BinaryNode,
  ctx: MappingContext,
): Promise<EngineEvent | null> {
  const from = node.attrs.from;
  const child = Array.isArray(node.content) ? node.content[0] : undefined;
  if (!from || !child || (child.tag !== 'composing' && child.tag !== 'paused')) return null;
  const isGroup = Boolean(isJidGroup(from));
  const participant = node.attrs.participant;
  const key: WAMessage['key'] = isGroup
    ? { remoteJid: from, participant: participant ?? null, participantAlt: node.attrs.participant_pn }
    : { remoteJid: from, remoteJidAlt: node.attrs.sender_pn };
  const source = await sourceOfKey(key, ctx, false);
  if (child.tag === 'paused') return { type: 'presence', source, state: 'paused', media: '' };
  return {
    type: 'presence',
    source,
    state: 'composing',
    media: child.attrs.media === 'audio' ? 'audio' : '',
  };
}

/** Name of a history sync type (`proto.HistorySync.HistorySyncType`), e.g. `INITIAL_BOOTSTRAP`. */
export function historySyncTypeName(type: proto.HistorySync.HistorySyncType | null | undefined): string {
  if (type === null || type === undefined) return 'UNKNOWN';
  return proto.HistorySync.HistorySyncType[type] ?? String(type);
}

/**
 * A history sync chunk (Baileys `messaging-history.set`, produced by `processHistoryMessage`) as a `history`
 * event (docs/decisions/0018-webhook-events-and-payloads.md `HistorySync`): the chunk's LID↔phone pairs are
 * remembered first, then every chat and its messages are mapped with phone JIDs.
 */
export async function historyFromSet(
  data: BaileysEventMap['messaging-history.set'],
  ctx: MappingContext,
  now: number,
): Promise<Extract<EngineEvent, { type: 'history' }>> {
  if (data.lidPnMappings) ctx.resolver.rememberAll(data.lidPnMappings);
  for (const contact of data.contacts) {
    if (contact.lid && contact.phoneNumber) ctx.resolver.remember(contact.lid, contact.phoneNumber);
  }
  const byChat = new Map<string, WAMessage[]>();
  for (const msg of data.messages) {
    const jid = msg.key.remoteJid;
    if (!jid) continue;
    const list = byChat.get(jid) ?? [];
    list.push(msg);
    byChat.set(jid, list);
  }
  const chats: HistoryChat[] = [];
  for (const chat of data.chats) {
    if (!chat.id) continue;
    const alt = chat.pnJid ?? undefined;
    const { jid } = await ctx.resolver.resolve(chat.id, alt);
    const messages: EngineMessage[] = [];
    for (const msg of byChat.get(chat.id) ?? []) {
      const mapped = await toEngineMessage(
        extended(msg, { key: extended(msg.key, { remoteJidAlt: msg.key.remoteJidAlt ?? alt }) }),
        ctx,
        now,
      );
      if (mapped) messages.push(mapped);
    }
    chats.push({ jid, name: chat.name ?? chat.displayName ?? '', messages });
  }
  return {
    type: 'history',
    syncType: historySyncTypeName(data.syncType),
    progress: data.progress ?? 0,
    chats,
  };
}
