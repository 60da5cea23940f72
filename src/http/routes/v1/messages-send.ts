import type { FastifyRequest } from 'fastify';
import { DomainError, errors } from '../../../domain/errors.ts';
import type { Instance } from '../../../domain/instance.ts';
import type { Jid, OutgoingContent, SentMessage } from '../../../domain/messages.ts';
import { GROUP_DOMAIN, userJid } from '../../../domain/messages.ts';
import type { EngineSession } from '../../../engines/engine.ts';
import type { Services } from '../../../services.ts';
import { resolveInstance, selectorOf } from '../../instance-resolution.ts';
import { authOf } from '../../plugins/auth.ts';
import type { SendResult } from './messages-schemas.ts';

/** The instance a message goes out of, and its engine session (logged in and connected). */
export interface Sender {
  instance: Instance;
  session: EngineSession;
}

/** True when a chat address (`phone` field) is a group JID rather than a phone number. */
export function isGroupAddress(address: string): boolean {
  return address.endsWith(`@${GROUP_DOMAIN}`);
}

/** The chat JID of a `phone` field: a phone number's user JID, or the group JID as given. */
export function chatJidOf(address: string): Jid {
  return isGroupAddress(address) ? address : userJid(address);
}

/**
 * The sending instance (DESIGN D4: body `from`, else query `from` / `x-instance-id`, else the most recently
 * connected) and its session, which must be logged in and connected.
 * @throws DomainError not_found `instance not found`; invalid `several instances: name one with from`;
 *   conflict `instance is not logged in` before login, `instance is not connected` when logged in but
 *   disconnected (DESIGN D6).
 */
export async function senderOf(services: Services, request: FastifyRequest, from?: string): Promise<Sender> {
  const selector = from !== undefined && from !== '' ? from : selectorOf(request);
  const instance = await resolveInstance(services.store.db, authOf(request), selector);
  return { instance, session: services.sessions.ready(instance) };
}

/**
 * Checks that the recipient of a one-to-one chat is registered on the platform, through the registration cache
 * (DESIGN D6); group chats are checked by the engine (membership).
 * @throws DomainError not_registered `recipient <phone> is not registered on the platform`.
 */
export async function requireRegistered(services: Services, sender: Sender, address: string): Promise<void> {
  if (isGroupAddress(address)) return;
  const [check] = await services.registrations.check(sender.instance.id, [address], (phones) =>
    sender.session.checkPhones(phones),
  );
  if (!check?.isInPlatform) {
    throw new DomainError('not_registered', `recipient ${address} is not registered on the platform`);
  }
}

/** The send result envelope data (SPEC Send result): `Sent`, the id, and the time as RFC 3339 UTC. */
export function sendResult(sent: SentMessage, id: string = sent.id): SendResult {
  return { details: 'Sent', id, timestamp: new Date(sent.timestamp).toISOString() };
}

/**
 * The whole send pipeline of DESIGN D2 for one message: sender (409), recipient registration (422), then the
 * content (built only now, so media is fetched only for a send that can go out), then the engine's send, which
 * returns after the message row is recorded.
 */
export async function sendMessage(
  services: Services,
  request: FastifyRequest,
  input: { phone: string; id?: string | undefined; from?: string | undefined },
  content: () => Promise<OutgoingContent> | OutgoingContent,
): Promise<SendResult> {
  const sender = await senderOf(services, request, input.from);
  await requireRegistered(services, sender, input.phone);
  const built = await content();
  const sent = await sender.session.send({
    to: chatJidOf(input.phone),
    content: built,
    ...(input.id === undefined ? {} : { quotedId: input.id }),
  });
  return sendResult(sent);
}

/**
 * Checks a vCard has the lines DESIGN D8 requires: BEGIN:VCARD, FN, N, TEL, END:VCARD (property names may carry
 * a group prefix such as `item1.TEL` and parameters such as `TEL;type=CELL`).
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
