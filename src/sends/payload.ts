import type { OutgoingContent, OutgoingMessage } from '../domain/messages.ts';
import { extended } from '../domain/objects.ts';

/**
 * How a send job stores the message it relays (docs/decisions/0009-sends-as-jobs.md): the `OutgoingMessage` as
 * JSON, with each media file's bytes as base64 under `media.data`, so any node can relay it after a restart or a
 * failover. The stored form carries no id: the job's key is the id.
 */

type StoredMedia = { data: string; mimetype: string };

/** Serialises `message` (its `id`, if any, is left out: the job row holds it). */
export function encodeSendPayload(message: OutgoingMessage): string {
  const { id: _id, ...rest } = message;
  const { content } = message;
  // Media sit only at `content.media`; a text is written as it is, without a replacer visiting every key.
  if (!('media' in content) || !isMedia(content.media)) return JSON.stringify(rest);
  const media: StoredMedia = {
    data: content.media.data.toString('base64'),
    mimetype: content.media.mimetype,
  };
  return JSON.stringify(extended(rest, { content: extended(content, { media }) }));
}

function isMedia(value: unknown): value is { data: Buffer; mimetype: string } {
  return (
    typeof value === 'object' &&
    value !== null &&
    'data' in value &&
    Buffer.isBuffer((value as { data: unknown }).data) &&
    'mimetype' in value
  );
}

/**
 * Reads a stored payload back as the message to relay under `id`.
 * @throws SyntaxError when `payload` is not JSON (a corrupt row).
 */
export function decodeSendPayload(payload: string, id: string): OutgoingMessage {
  const parsed = JSON.parse(payload) as Omit<OutgoingMessage, 'id' | 'content'> & {
    content: OutgoingContent & { media?: StoredMedia };
  };
  const content = parsed.content;
  const restored =
    'media' in content && content.media !== undefined && typeof content.media.data === 'string'
      ? extended(content, {
          media: { data: Buffer.from(content.media.data, 'base64'), mimetype: content.media.mimetype },
        })
      : content;
  return extended(parsed, { content: restored as OutgoingContent, id });
}
