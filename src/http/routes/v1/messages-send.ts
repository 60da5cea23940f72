import type { FastifyRequest } from 'fastify';
import { errors } from '../../../domain/errors.ts';
import type { OutgoingContent, SentMessage } from '../../../domain/messages.ts';
import type { Services } from '../../../services.ts';
import { instanceIdOf } from '../../plugins/instance.ts';
import type { SendResult } from './messages-schemas.ts';

/** The send result envelope data (docs/api.md#messages): `Sent`, the id, and the time as RFC 3339 UTC. */
export function sendResult(sent: SentMessage, id: string = sent.id): SendResult {
  return { details: 'Sent', id, timestamp: new Date(sent.timestamp).toISOString() };
}

/**
 * Sends one message out of the request's instance through the messaging service
 * (docs/decisions/0024-engines-and-data-flow.md: session 409, recipient registration 422, then `content` is built,
 * then the engine's send) and answers its result.
 */
export async function sendMessage(
  services: Services,
  request: FastifyRequest,
  input: { phone: string; id?: string | undefined; mentions?: readonly string[] | undefined },
  content: () => Promise<OutgoingContent> | OutgoingContent,
): Promise<SendResult> {
  const sent = await services.app.messaging.send(
    instanceIdOf(request),
    { phone: input.phone, quotedId: input.id, mentions: input.mentions },
    content,
  );
  return sendResult(sent);
}

/**
 * Checks `mentions` of a text or caption (WhatsApp renders a mention from contextInfo.mentionedJid plus the
 * `@<phone>` written in the text): unique numbers, each written `@<phone>` in `text` (the field named `field`).
 * @throws DomainError invalid `mentions must be unique`, `mentions: 5511977776666 must appear in body as
 *   @5511977776666`.
 */
export function checkMentions(
  mentions: readonly string[] | undefined,
  text: string | undefined,
  field: string,
): void {
  if (mentions === undefined) return;
  if (new Set(mentions).size !== mentions.length) throw errors.badRequest('mentions must be unique');
  for (const phone of mentions) {
    if (!new RegExp(`@${phone}(?![0-9])`).test(text ?? '')) {
      throw errors.badRequest(`mentions: ${phone} must appear in ${field} as @${phone}`);
    }
  }
}

/**
 * Checks a vCard has the lines docs/decisions/0017-messages-and-media.md requires: BEGIN:VCARD, FN, N, TEL, END:VCARD
 * (property names may carry a group prefix such as `item1.TEL` and parameters such as `TEL;type=CELL`).
 * @throws DomainError invalid naming the first missing line, e.g. `vcard must contain a TEL line`.
 */
export function checkVcard(vcard: string, field = 'vcard'): void {
  const lines = vcard.split(/\r\n|\r|\n/).map((line) => line.trim());
  const has = (property: string) =>
    lines.some((line) => new RegExp(`^(?:[A-Za-z0-9-]+\\.)?${property}[;:]`, 'i').test(line));
  const required: [boolean, string][] = [
    [lines.some((l) => /^BEGIN:VCARD$/i.test(l)), 'the line BEGIN:VCARD'],
    [has('FN'), 'an FN line'],
    [has('N'), 'an N line'],
    [has('TEL'), 'a TEL line'],
    [lines.some((l) => /^END:VCARD$/i.test(l)), 'the line END:VCARD'],
  ];
  for (const [present, line] of required) {
    if (!present) throw errors.badRequest(`${field} must contain ${line}`);
  }
}

/** One RGI emoji sequence (Unicode sets mode, Node 20+; the flag is passed as a string for ES2022 typing). */
const UNICODE_SETS: string = 'v';
const RGI_EMOJI = new RegExp('^\\p{RGI_Emoji}$', UNICODE_SETS);

/**
 * Whether `body` is one reaction emoji (or '' to remove): a single RGI emoji sequence, or one pictographic
 * character with an optional variation selector (e.g. `❤` as well as `❤️`).
 */
export function isReactionEmoji(body: string): boolean {
  if (body === '') return true;
  return RGI_EMOJI.test(body) || /^\p{Extended_Pictographic}\uFE0F?$/u.test(body);
}
