import {
  type AnyMessageContent,
  extractUrlFromText,
  generateWAMessage,
  getContentType,
  isJidGroup,
  normalizeMessageContent,
  type proto,
  type WAMediaUploadFunction,
  type WAMessage,
  type WAUrlInfo,
} from 'baileys';
import { errors } from '../../domain/errors.ts';
import type {
  EngineMessage,
  Jid,
  MessageContent,
  OutgoingContent,
  OutgoingMessage,
} from '../../domain/messages.ts';
import { extended } from '../../domain/objects.ts';
import { imageThumbnail } from '../../media/image.ts';
import type { BaileysLogger } from './socket.ts';

/** A link preview a fetcher found for a URL (fetched by parley under its SSRF guard, never by Baileys). */
export interface LinkPreview {
  title: string;
  description?: string;
  /** Small JPEG shown in the bubble. */
  jpegThumbnail?: Buffer;
}

/**
 * Fetches a preview for `url`; undefined when none could be made. parley wires none today: a live text send with
 * `linkPreview: true` gets a card whose title is the link's host name (the page is never fetched).
 */
export type LinkPreviewFetcher = (url: string) => Promise<LinkPreview | undefined>;

/**
 * The WhatsApp mimetype of a voice note: OGG/Opus must say `codecs=opus` or phones refuse to play it as a PTT
 * (Baileys README); other formats pass through as sniffed.
 */
export function voiceNoteMimetype(mimetype: string): string {
  return /^audio\/ogg\b/i.test(mimetype) && !/codecs=/i.test(mimetype) ? 'audio/ogg; codecs=opus' : mimetype;
}

/**
 * The Baileys `AnyMessageContent` for one of parley's sends (docs/decisions/0017-messages-and-media.md): text with
 * link preview off unless asked (`linkPreview: null` stops Baileys from fetching; a preview, when asked, is passed in
 * `preview`); image, video, document (file name, caption), audio as a voice note (`ptt`), sticker (animated flag; its
 * WEBP already carries the pack metadata), location, contact
 * card (one vCard). Media bytes go as Buffers; Baileys encrypts and uploads them.
 */
export function toBaileysContent(content: OutgoingContent, preview?: WAUrlInfo): AnyMessageContent {
  switch (content.kind) {
    case 'text':
      return { text: content.text, linkPreview: content.linkPreview && preview ? preview : null };
    case 'image':
      return { image: content.media.data, mimetype: content.media.mimetype, ...caption(content.caption) };
    case 'video':
      return { video: content.media.data, mimetype: content.media.mimetype, ...caption(content.caption) };
    case 'document':
      return {
        document: content.media.data,
        mimetype: content.media.mimetype,
        fileName: content.fileName,
        ...caption(content.caption),
      };
    case 'audio':
      return content.ptt === false
        ? { audio: content.media.data, mimetype: content.media.mimetype, ptt: false }
        : { audio: content.media.data, mimetype: voiceNoteMimetype(content.media.mimetype), ptt: true };
    case 'sticker':
      return { sticker: content.media.data, mimetype: 'image/webp', isAnimated: content.animated };
    case 'location':
      return {
        location: {
          degreesLatitude: content.latitude,
          degreesLongitude: content.longitude,
          ...(content.name ? { name: content.name } : {}),
          ...(content.address ? { address: content.address } : {}),
        },
      };
    case 'contact':
      return {
        contacts: {
          displayName: content.displayName,
          contacts: [{ displayName: content.displayName, vcard: content.vcard }],
        },
      };
    case 'poll':
      return {
        poll: { name: content.name, values: [...content.options], selectableCount: content.selectableCount },
      };
    default: {
      const unreachable: never = content;
      throw new Error(`unknown content ${JSON.stringify(unreachable)}`);
    }
  }
}

function caption(text: string | undefined): { caption?: string } {
  return text ? { caption: text } : {};
}

/**
 * A platform message carrying a stored message's content, for the quote of a reply (`contextInfo.quotedMessage`):
 * media are represented by their caption/mimetype only (a quote shows a label, not the file).
 */
export function quotableProto(content: MessageContent): proto.IMessage {
  const text = content.text ?? '';
  switch (content.kind) {
    case 'text':
      return { conversation: text };
    case 'image':
      return { imageMessage: { caption: text, mimetype: content.mimetype ?? 'image/jpeg' } };
    case 'video':
      return { videoMessage: { caption: text, mimetype: content.mimetype ?? 'video/mp4' } };
    case 'audio':
      return { audioMessage: { mimetype: content.mimetype ?? 'audio/ogg; codecs=opus', ptt: true } };
    case 'document':
      return {
        documentMessage: {
          fileName: content.fileName ?? 'file',
          mimetype: content.mimetype ?? '',
          caption: text,
        },
      };
    case 'sticker':
      return { stickerMessage: { mimetype: 'image/webp' } };
    case 'location':
      return { locationMessage: locationOf(content) };
    case 'contact':
      return { contactMessage: { displayName: content.name ?? '', vcard: content.vcard ?? '' } };
    default:
      return { conversation: text };
  }
}

function locationOf(content: MessageContent): proto.Message.ILocationMessage {
  return {
    degreesLatitude: content.latitude ?? 0,
    degreesLongitude: content.longitude ?? 0,
    ...(content.name ? { name: content.name } : {}),
    ...(content.address ? { address: content.address } : {}),
  };
}

/**
 * The platform message Baileys' `getMessage` should answer for a retry request, rebuilt from the message store:
 * only contents that can be re-sent exactly (text, location, contact card); undefined for media (their keys are not
 * stored) and anything else, as Baileys expects on a miss.
 */
export function resendableProto(content: MessageContent): proto.IMessage | undefined {
  switch (content.kind) {
    case 'text':
      return { conversation: content.text ?? '' };
    case 'location':
      return { locationMessage: locationOf(content) };
    case 'contact':
      return { contactMessage: { displayName: content.name ?? '', vcard: content.vcard ?? '' } };
    default:
      return undefined;
  }
}

/**
 * The message to quote for a reply to `found` in `chat` (Baileys `quoted` option): key from the stored source
 * (`fromMe`, group `participant` = the stored sender) and {@link quotableProto} of its content.
 */
export function quotedFromStore(chat: Jid, found: EngineMessage): WAMessage {
  const isGroup = Boolean(isJidGroup(chat));
  return {
    key: {
      remoteJid: chat,
      fromMe: found.source.isFromMe,
      id: found.id,
      ...(isGroup && !found.source.isFromMe ? { participant: found.source.sender } : {}),
    },
    message: quotableProto(found.content),
  };
}

/** Dependencies of {@link buildOutgoingMessage}: the socket's upload and identity, the store, a preview fetcher. */
export interface OutgoingDeps {
  /** Baileys' media upload (`sock.waUploadToServer`; tests pass a stub). */
  upload: WAMediaUploadFunction;
  /** The account's device JID (`creds.me.id`). */
  userJid: string;
  /** Id of the new message (`generateMessageIDV2`). */
  messageId: string;
  findMessage(id: string): Promise<EngineMessage | undefined>;
  /**
   * The JID the messages of chat `jid` are stored under: a LID's phone JID when a mapping knows it, any other JID as
   * it is (docs/decisions/0038-lid-mappings.md). Absent: every JID as it is.
   */
  storedChatOf?(jid: Jid): Promise<Jid>;
  logger: BaileysLogger;
  linkPreview?: LinkPreviewFetcher;
}

/**
 * The stored message a reply to `quotedId` in chat `to` quotes; undefined when parley never stored it. A message of
 * another chat is refused rather than quoted (docs/decisions/0017-messages-and-media.md): its quote would show that
 * chat's words, under the chat's own author, as said in this one. A LID and the phone JID a mapping gives it are one
 * chat (`deps.storedChatOf`).
 * @throws DomainError invalid `id must name a message in this chat`.
 */
async function quotedMessage(
  to: Jid,
  quotedId: string,
  deps: OutgoingDeps,
): Promise<EngineMessage | undefined> {
  const found = await deps.findMessage(quotedId);
  if (!found || found.source.chat === to) return found;
  const chatOf = deps.storedChatOf ?? (async (jid: Jid) => jid);
  const [stored, destination] = await Promise.all([chatOf(found.source.chat), chatOf(to)]);
  if (stored !== destination) throw errors.quotedElsewhere();
  return found;
}

/**
 * The thumbnail fields of an image message's content (docs/decisions/0017-messages-and-media.md): `jpegThumbnail`
 * (base64 JPEG), `width` and `height` (pixels), made by parley ({@link imageThumbnail}: at most 32,000,000 pixels
 * decoded, within 10 s) so that Baileys never decodes the image itself. Its `prepareWAMessageMedia`
 * (Utils/messages.js) makes a thumbnail only when `jpegThumbnail` is undefined, and then with sharp's default limit of
 * 268,402,689 pixels (`extractImageThumb`, Utils/messages-media.js): an image of a few bytes declaring 16,000 × 16,000
 * pixels would make it decode 1 GB. When parley's thumbnail cannot be made (an image over the limit, which the send
 * checks refuse before the engine sees one, an unreadable or too slow one), `jpegThumbnail` is `null`, logged: Baileys
 * then makes none, the protobuf leaves the field out, and the image goes without a thumbnail, as it did when Baileys'
 * own failed. Never throws.
 */
export async function imageThumbnailFields(
  data: Buffer,
  logger: BaileysLogger,
): Promise<{ jpegThumbnail: string | null; width?: number; height?: number }> {
  try {
    const { jpeg, width, height } = await imageThumbnail(data);
    return { jpegThumbnail: jpeg.toString('base64'), width, height };
  } catch (error) {
    logger.warn({ err: error }, 'image thumbnail could not be made; sending the image without one');
    return { jpegThumbnail: null };
  }
}

/**
 * Builds the complete platform message for a send with Baileys' own `generateWAMessage` (the same call
 * `sock.sendMessage` makes), ready for `sock.relayMessage` (docs/decisions/0025-live-engine.md). A reply quotes the
 * stored message via `contextInfo`; when parley never stored it, the reply still carries `contextInfo.stanzaId` (and
 * the peer as participant in 1:1 chats) so phones that have the message show the quote; a message parley stored in
 * another chat is refused (400 `id must name a message in this chat`). Media bytes are uploaded
 * unchanged, so a sticker keeps the pack metadata the media layer wrote into its WEBP EXIF
 * (docs/decisions/0017-messages-and-media.md). An image carries the thumbnail parley made
 * ({@link imageThumbnailFields}), so Baileys does not decode it.
 */
export async function buildOutgoingMessage(
  to: Jid,
  message: OutgoingMessage,
  deps: OutgoingDeps,
): Promise<WAMessage> {
  const content = message.content;
  let preview: WAUrlInfo | undefined;
  if (content.kind === 'text' && content.linkPreview) preview = await previewFor(content.text, deps);
  const found = message.quotedId ? await quotedMessage(to, message.quotedId, deps) : undefined;
  const plain = toBaileysContent(content, preview);
  const base =
    content.kind === 'image'
      ? extended(plain, await imageThumbnailFields(content.media.data, deps.logger))
      : plain;
  const withMentions = message.mentions?.length ? extended(base, { mentions: [...message.mentions] }) : base;
  const msg = await generateWAMessage(to, withMentions as AnyMessageContent, {
    upload: deps.upload,
    userJid: deps.userJid,
    messageId: deps.messageId,
    logger: deps.logger,
    ...(found ? { quoted: quotedFromStore(to, found) } : {}),
    ...statusTextOptions(content),
  });
  if (message.quotedId && !found) attachStanzaId(msg, to, message.quotedId);
  if (message.forwardingScore !== undefined && message.forwardingScore > 0) {
    attachForwarded(msg, message.forwardingScore);
  }
  return msg;
}

/**
 * The `backgroundColor` and `font` options Baileys turns into a status text's `extendedTextMessage.backgroundArgb`
 * and `font` (Utils/messages.js generateWAMessageContent; docs/decisions/0044-status-stories.md). The colour goes
 * as `#AARRGGBB` text: Baileys' `assertColor` parses a string, and drops a number.
 */
export function statusTextOptions(content: OutgoingContent): { backgroundColor?: string; font?: number } {
  if (content.kind !== 'text') return {};
  return {
    ...(content.backgroundArgb === undefined
      ? {}
      : {
          backgroundColor: `#${(content.backgroundArgb >>> 0).toString(16).toUpperCase().padStart(8, '0')}`,
        }),
    ...(content.font === undefined ? {} : { font: content.font }),
  };
}

/**
 * Marks a built message forwarded as Baileys' `generateForwardMessageContent` does (Utils/messages.js):
 * `contextInfo = { forwardingScore, isForwarded: true }` on the message's content part, replacing any quote or
 * mentions (a forward carries neither).
 */
function attachForwarded(msg: WAMessage, score: number): void {
  const inner = normalizeMessageContent(msg.message);
  if (!inner) return;
  if (inner.conversation !== undefined && inner.conversation !== null) {
    inner.extendedTextMessage = { text: inner.conversation };
    delete inner.conversation;
  }
  const type = getContentType(inner);
  if (!type) return;
  const part = inner[type];
  if (typeof part !== 'object' || part === null) return;
  (part as { contextInfo?: proto.IContextInfo | null }).contextInfo = {
    forwardingScore: score,
    isForwarded: true,
  };
}

async function previewFor(text: string, deps: OutgoingDeps): Promise<WAUrlInfo | undefined> {
  const url = extractUrlFromText(text);
  if (!url) return undefined;
  let fetched: LinkPreview | undefined;
  try {
    fetched = await deps.linkPreview?.(url);
  } catch (error) {
    deps.logger.warn({ err: error }, 'link preview failed; sending without a preview card');
  }
  let title = fetched?.title;
  if (!title) {
    try {
      title = new URL(url).hostname;
    } catch {
      title = url;
    }
  }
  return {
    'canonical-url': url,
    'matched-text': url,
    title,
    ...(fetched?.description ? { description: fetched.description } : {}),
    ...(fetched?.jpegThumbnail ? { jpegThumbnail: fetched.jpegThumbnail } : {}),
  };
}

function attachStanzaId(msg: WAMessage, to: Jid, quotedId: string): void {
  const inner = normalizeMessageContent(msg.message);
  const type = getContentType(inner ?? undefined);
  if (!inner || !type) return;
  const part = inner[type];
  if (typeof part !== 'object' || part === null || !('contextInfo' in part || type.endsWith('Message')))
    return;
  const holder = part as { contextInfo?: proto.IContextInfo | null };
  holder.contextInfo = {
    ...(holder.contextInfo ?? {}),
    stanzaId: quotedId,
    ...(isJidGroup(to) ? {} : { participant: to }),
  };
}

/**
 * A reaction (docs/api.md#messages) as a platform message built by `generateWAMessage`: `reactionMessage.key` points
 * at the target (`fromMe` for the account's own messages, the `me:` ids of docs/api.md#messages; `participant` = the
 * target's sender in groups when known); `emoji` '' removes the reaction.
 */
export async function buildReaction(
  chat: Jid,
  target: { id: string; fromMe: boolean; participant?: Jid },
  emoji: string,
  deps: Pick<OutgoingDeps, 'upload' | 'userJid' | 'messageId' | 'logger'>,
): Promise<WAMessage> {
  return generateWAMessage(
    chat,
    {
      react: {
        text: emoji,
        key: {
          remoteJid: chat,
          id: target.id,
          fromMe: target.fromMe,
          ...(target.participant && isJidGroup(chat) && !target.fromMe
            ? { participant: target.participant }
            : {}),
        },
      },
    },
    { upload: deps.upload, userJid: deps.userJid, messageId: deps.messageId, logger: deps.logger },
  );
}
