import { DomainError, errors } from '../../domain/errors.ts';
import type { EngineMessage, MessageContent, SentMessage } from '../../domain/messages.ts';
import type { EngineSessionContext, SandboxInboundMediaInput } from '../engine.ts';
import type { SandboxAccount } from './account.ts';
import { arrive } from './messaging.ts';

/**
 * Media files on the simulated platform: what a simulated user sends through `POST /v1/sandbox/inbound/media` is
 * kept by the sandbox's "media server" (the instance's auth port, category `sandbox-media`, sealed like the rest
 * of the simulated world) so that parley can download it later, as it downloads a live message's file from the
 * platform's media hosts. Like the platform's media links, a link expires {@link SANDBOX_MEDIA_TTL_MS} after the
 * file was uploaded; then, as on the platform (docs/decisions/0046-media-re-upload.md), the sender's simulated
 * phone is asked to upload it again, which needs the instance connected: the phone still has the file (a
 * simulated phone never deletes what it sent), so the link is renewed for another {@link SANDBOX_MEDIA_TTL_MS}
 * and the file served.
 */

/** How long the simulated platform keeps a file, ms (14 days, the lifetime of the platform's media links). */
export const SANDBOX_MEDIA_TTL_MS = 14 * 86_400_000;

const MEDIA = 'sandbox-media';

/** A file as the simulated platform keeps it. */
interface KeptFile {
  /** The bytes, base64. */
  data: string;
  /** When it was sent, epoch ms. */
  sentAt: number;
  /** When the sender's phone last uploaded it again, epoch ms; absent: never (the link dates from `sentAt`). */
  uploadedAt?: number;
  /** How many times the sender's phone uploaded it again. */
  reuploads?: number;
}

/**
 * Helper: user `input.phone` sends a media file → `message` event with the file's kind, declared MIME type,
 * size, caption, file name (documents) and voice-note flag (audio), and a `download` reference to the kept
 * file. Errors as the text helper (sender not registered, not in the group, not logged in).
 */
export function inboundMedia(account: SandboxAccount, input: SandboxInboundMediaInput): Promise<SentMessage> {
  return arrive(account, input, async (id) => {
    const kept: KeptFile = { data: input.data.toString('base64'), sentAt: account.context.clock() };
    await account.context.auth.set([{ category: MEDIA, id, value: JSON.stringify(kept) }]);
    const content: MessageContent = {
      kind: input.kind,
      mimetype: input.mimetype,
      fileLength: input.data.length,
      download: id,
    };
    if (input.caption !== undefined && input.kind !== 'audio' && input.kind !== 'sticker')
      content.text = input.caption;
    if (input.kind === 'document') content.fileName = input.fileName ?? 'file';
    if (input.kind === 'audio') content.ptt = input.ptt ?? false;
    return content;
  });
}

/**
 * The bytes of a media message the simulated platform keeps (see {@link inboundMedia}). Past its link's expiry
 * the sender's phone uploads the file again: `connected` is awaited first (it throws when the instance cannot ask
 * the phone now), then the link is renewed and the file served.
 * @throws DomainError not_found when the message has no reference; gone when the simulated platform has no such
 *   file (files stored before re-uploads were modelled were deleted at their expiry); too_large over `maxBytes`;
 *   what `connected` throws (not_logged_in, not_connected) when the link expired.
 */
export async function downloadMedia(
  context: EngineSessionContext,
  message: EngineMessage,
  maxBytes: number,
  connected: () => Promise<void>,
): Promise<AsyncIterable<Buffer>> {
  const id = message.content.download;
  if (id === undefined) throw errors.notFound(`message ${message.id} has no downloadable media`);
  const value = (await context.auth.get(MEDIA, [id])).get(id);
  const kept = value === undefined ? undefined : (JSON.parse(value) as KeptFile);
  if (!kept) {
    throw new DomainError(
      'gone',
      `the platform no longer has the media of message ${message.id} (its media links expire after a while), parley had not kept a copy, and the sender's phone could not upload it again: it no longer has the file (NOT_FOUND)`,
    );
  }
  const now = context.clock();
  if (now - (kept.uploadedAt ?? kept.sentAt) > SANDBOX_MEDIA_TTL_MS) {
    await connected();
    const renewed: KeptFile = { ...kept, uploadedAt: now, reuploads: (kept.reuploads ?? 0) + 1 };
    await context.auth.set([{ category: MEDIA, id, value: JSON.stringify(renewed) }]);
  }
  const data = Buffer.from(kept.data, 'base64');
  if (data.length > maxBytes) {
    throw new DomainError('too_large', `media of message ${message.id} is larger than the limit`);
  }
  return (async function* () {
    yield data;
  })();
}
