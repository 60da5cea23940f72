import type { FastifyReply, FastifyRequest } from 'fastify';
import type { HttpServices } from '../../../app/http-services.ts';
import { errors } from '../../../domain/errors.ts';
import type { OutgoingContent, SentMessage } from '../../../domain/messages.ts';
import { extended } from '../../../domain/objects.ts';
import { clientGone } from '../../client-gone.ts';
import { forwardIdOf } from '../../plugins/forward.ts';
import { idempotentRequestIdOf } from '../../plugins/idempotency.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { ok } from '../../schemas.ts';
import type { QueuedResult, SendResult } from './messages-schemas.ts';

/** The send result envelope data (docs/api.md#messages): `Sent`, the id, and the time as RFC 3339 UTC. */
export function sendResult(sent: SentMessage, id: string = sent.id): SendResult {
  return { details: 'Sent', id, timestamp: new Date(sent.timestamp).toISOString() };
}

/** The 202 envelope of an accepted asynchronous send. */
export interface QueuedEnvelope {
  success: true;
  code: 202;
  data: QueuedResult;
}

/**
 * True when the request asks to be answered before the work is done: `Prefer: respond-async` (RFC 7240 §4.1),
 * alone or among other preferences.
 */
export function prefersAsync(request: FastifyRequest): boolean {
  const header = request.headers.prefer;
  const values = Array.isArray(header) ? header : header === undefined ? [] : [header];
  return values.some((value) =>
    value.split(',').some((pref) => pref.split(';')[0]?.trim().toLowerCase() === 'respond-async'),
  );
}

/**
 * Sends one message out of the request's instance through the messaging service, as a job stored before its
 * relay (docs/decisions/0009-sends-as-jobs.md). By default the answer waits for the relay: 200 `Sent`. With
 * `Prefer: respond-async` or a `sendAt` (RFC 3339) the job is queued: 202 `Queued` with its id, `pending` and
 * `sendAt`, and its outcome arrives as a `MessageStatus` event.
 * @throws DomainError invalid `sendAt must be a date-time…`, `sendAt must be in the future`, `sendAt must be at
 *   most 30 days ahead`; the service's errors.
 */
export async function sendMessage(
  services: HttpServices,
  request: FastifyRequest,
  reply: FastifyReply,
  input: {
    phone: string;
    id?: string | undefined;
    mentions?: readonly string[] | undefined;
    sendAt?: string | undefined;
    forwardingScore?: number | undefined;
    /** A status's audience: phone numbers (docs/decisions/0044-status-stories.md). */
    statusJidList?: readonly string[] | undefined;
  },
  content: () => Promise<OutgoingContent> | OutgoingContent,
): Promise<{ success: true; code: 200; data: SendResult } | QueuedEnvelope> {
  const send = {
    phone: input.phone,
    quotedId: input.id,
    mentions: input.mentions,
    forwardingScore: input.forwardingScore,
    statusJidList: input.statusJidList,
  };
  // A send another node forwarded: its job follows from the forward id (src/http/plugins/forward.ts); one run under
  // an `Idempotency-Key` claim, from the id of the request the claim continues (docs/decisions/0010-idempotency.md).
  const origin = { forwardId: forwardIdOf(request) ?? idempotentRequestIdOf(request) };
  if (input.sendAt === undefined && !prefersAsync(request)) {
    // A client gone before the answer stops the wait: the outcome becomes a MessageStatus event.
    const waiting = extended(origin, { signal: clientGone(reply) });
    return ok(sendResult(await services.app.messaging.send(instanceOf(request), send, content, waiting)));
  }
  const sendAt = input.sendAt === undefined ? null : Date.parse(input.sendAt);
  if (sendAt !== null && Number.isNaN(sendAt)) {
    throw errors.badRequest('sendAt must be a date-time in RFC 3339 format');
  }
  const queued = await services.app.messaging.enqueue(instanceOf(request), send, content, sendAt, origin);
  reply.code(202).header('preference-applied', 'respond-async');
  return {
    success: true,
    code: 202,
    data: {
      details: 'Queued',
      id: queued.id,
      status: queued.status,
      sendAt: queued.sendAt === null ? null : new Date(queued.sendAt).toISOString(),
    },
  };
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
