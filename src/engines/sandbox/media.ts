import { DomainError, errors } from '../../domain/errors.ts';
import type { EngineMessage, MessageContent, SentMessage } from '../../domain/messages.ts';
import type { EngineSessionContext, SandboxInboundMediaInput } from '../engine.ts';
import type { SandboxAccount } from './account.ts';
import { arrive } from './messaging.ts';

/**
 * Media files on the simulated platform: what a simulated user sends through `POST /v1/sandbox/inbound/media` is
 * kept by the sandbox's "media server" (the instance's auth port, category `sandbox-media`, sealed like the rest
 * of the simulated world) so that parley can download it later, as it downloads a live message's file from the
 * platform's media hosts. Like the platform's media links, a file expires: {@link SANDBOX_MEDIA_TTL_MS} after it
 * was sent the simulated platform answers that it no longer has it.
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
 * The bytes of a media message the simulated platform keeps (see {@link inboundMedia}).
 * @throws DomainError not_found when the message has no reference; gone when the file expired or is unknown
 *   (an expired file is deleted); too_large over `maxBytes`.
 */
export async function downloadMedia(
  context: EngineSessionContext,
  message: EngineMessage,
  maxBytes: number,
): Promise<AsyncIterable<Buffer>> {
  const id = message.content.download;
  if (id === undefined) throw errors.notFound(`message ${message.id} has no downloadable media`);
  const value = (await context.auth.get(MEDIA, [id])).get(id);
  const kept = value === undefined ? undefined : (JSON.parse(value) as KeptFile);
  if (!kept || context.clock() - kept.sentAt > SANDBOX_MEDIA_TTL_MS) {
    if (kept) await context.auth.set([{ category: MEDIA, id, value: null }]);
    throw new DomainError(
      'gone',
      `the platform no longer has the media of message ${message.id}: its media links expire after a while, and parley had not kept a copy`,
    );
  }
  const data = Buffer.from(kept.data, 'base64');
  if (data.length > maxBytes) {
    throw new DomainError('too_large', `media of message ${message.id} is larger than the limit`);
  }
  return (async function* () {
    yield data;
  })();
}
