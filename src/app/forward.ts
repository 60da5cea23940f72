import type { Readable } from 'node:stream';
import { checkResend } from '../domain/content-rules.ts';
import { DomainError, errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import type { OutgoingContent } from '../domain/messages.ts';
import { MEDIA_RULES, type MediaKind } from '../media/kinds.ts';
import { type CheckedMedia, checkStoredMedia } from '../media/prepare.ts';
import { mediaTooLarge } from '../media/source.ts';
import type { Store } from '../store/database.ts';
import { findStoredMessage, type StoredMessage } from '../store/messages.ts';
import type { MediaService } from './media.ts';

/** What {@link ForwardService.prepare} answers: the content to send again and the forwarding score to mark it with. */
export interface PreparedForward {
  /** Builds the content (media kinds read their file only now, when the send goes ahead). */
  content: () => Promise<OutgoingContent>;
  /**
   * The forwarding score of the forward: the stored message's own score plus one, except that a forward of the
   * account's own message that was never forwarded keeps 0 (not marked forwarded), as WhatsApp and Baileys'
   * `generateForwardMessageContent` (Utils/messages.js) do. Undefined for 0.
   */
  forwardingScore: number | undefined;
}

/**
 * `POST /v1/messages/forward` (docs/decisions/0041-forward-calls-channels.md): a stored message sent again to another
 * chat, marked forwarded. parley stores messages normalised (src/domain/messages.ts `MessageContent`), not as the
 * platform's protobuf, so a forward is a new send of the stored content: text, location, contact and poll as stored,
 * media with the file read from parley's media store or fetched from the platform again (`MediaService.open`), the
 * caption and file name kept; a quote and mentions are dropped, as the platform drops them on a forward. A file meets
 * the rules a send of its kind meets (src/media/prepare.ts `checkStoredMedia`): what a sender delivered is not trusted
 * for being delivered.
 */
export class ForwardService {
  readonly #store: Store;
  readonly #media: MediaService;

  constructor(deps: { store: Store; media: MediaService }) {
    this.#store = deps.store;
    this.#media = deps.media;
  }

  /**
   * The content and forwarding score of forwarding stored message `messageId` of `instance`.
   * @throws DomainError not_found `message not found`; invalid `message <id> cannot be forwarded: <rule>` for content
   *   that breaks the send rules of its kind (src/domain/content-rules.ts `checkResend`: a poll's options, a contact's
   *   vCard, a location's coordinates, a text's length), `message <id> cannot be forwarded (it is a|an <kind>
   *   message)` for reactions, interactive replies (docs/decisions/0110-interactive-replies.md: parley cannot send
   *   the platform message they are) and messages parley does not understand, `message <id> was deleted`. The content
   *   builder throws what `MediaService.open` throws (not_found when the file cannot be fetched again, e.g. media
   *   parley sent itself; gone; too_large), and the send rules' too_large and invalid naming the kind
   *   (`sticker must be at most 500 KB`, `image must be JPEG, PNG, GIF or WEBP`, `image must be at most 32,000,000
   *   pixels, width × height (it has <n>)`; docs/decisions/0017-messages-and-media.md).
   */
  async prepare(instance: Instance, messageId: string): Promise<PreparedForward> {
    const message = await findStoredMessage(this.#store.db, instance.id, messageId);
    if (!message) throw errors.notFound('message not found');
    const { content } = message;
    if (content.deletedAt !== undefined) throw errors.badRequest(`message ${messageId} was deleted`);
    if (content.kind === 'reaction' || content.kind === 'interactive_reply' || content.kind === 'other') {
      const article = /^[aeiou]/.test(content.kind) ? 'an' : 'a';
      throw errors.badRequest(
        `message ${messageId} cannot be forwarded (it is ${article} ${content.kind} message)`,
      );
    }
    try {
      checkResend(content);
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      throw errors.badRequest(`message ${messageId} cannot be forwarded: ${error.message}`);
    }
    const score = (content.forwardingScore ?? 0) + (message.source.isFromMe ? 0 : 1);
    return {
      content: () => this.#content(instance, message),
      forwardingScore: score > 0 ? score : undefined,
    };
  }

  async #content(instance: Instance, message: StoredMessage): Promise<OutgoingContent> {
    const { content } = message;
    const caption = content.text === undefined || content.text === '' ? {} : { caption: content.text };
    switch (content.kind) {
      case 'text':
        return { kind: 'text', text: content.text ?? '', linkPreview: false };
      case 'location':
        return {
          kind: 'location',
          latitude: content.latitude ?? 0,
          longitude: content.longitude ?? 0,
          ...(content.name === undefined ? {} : { name: content.name }),
          ...(content.address === undefined ? {} : { address: content.address }),
        };
      case 'contact':
        return { kind: 'contact', displayName: content.name ?? '', vcard: content.vcard ?? '' };
      case 'poll':
        return {
          kind: 'poll',
          name: content.text ?? '',
          options: [...(content.poll?.options ?? [])],
          selectableCount: content.poll?.selectableCount ?? 0,
        };
      case 'image':
      case 'video': {
        const { media } = await this.#file(instance, message.id, content.kind);
        return { kind: content.kind, media, ...caption };
      }
      case 'document': {
        const fileName = content.fileName ?? 'file';
        const { media } = await this.#file(instance, message.id, 'document', fileName);
        return { kind: 'document', media, fileName, ...caption };
      }
      case 'audio':
        return {
          kind: 'audio',
          media: (await this.#file(instance, message.id, 'audio')).media,
          ...(content.ptt === false ? { ptt: false } : {}),
        };
      case 'sticker': {
        const { media, animated } = await this.#file(instance, message.id, 'sticker');
        return { kind: 'sticker', media, animated };
      }
      default:
        throw errors.badRequest(
          `message ${message.id} cannot be forwarded (it is a ${content.kind} message)`,
        );
    }
  }

  /**
   * The file of media message `id`, whole, checked by the rules a send of `kind` meets ({@link checkStoredMedia}):
   * over the kind's limit it is refused before it is read; the MIME type sent is the one of its bytes.
   */
  async #file(instance: Instance, id: string, kind: MediaKind, fileName?: string): Promise<CheckedMedia> {
    const file = await this.#media.open(instance, id);
    const rule = MEDIA_RULES[kind];
    if (file.size > rule.maxBytes) throw mediaTooLarge(kind, rule);
    return checkStoredMedia(kind, await readAll(file.open()), fileName);
  }
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks);
}
