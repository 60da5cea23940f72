import { errors } from './errors.ts';

/**
 * The rules a contact card and a poll meet before they are sent (docs/decisions/0017-messages-and-media.md,
 * docs/decisions/0026-chats-edits-polls-and-calls.md), whether a caller wrote them (`/send/contact`, `/send/poll`) or a
 * forward sends a stored message again (docs/decisions/0041-forward-calls-channels.md).
 */

/** Most options a WhatsApp poll may have. */
export const MAX_POLL_OPTIONS = 12;

/**
 * The logical lines of a vCard: its physical lines (CRLF, LF or CR) with folded ones joined (RFC 6350 §3.2: a line
 * that starts with a space or a tab continues the one before it, that first character dropped). A leading byte order
 * mark is dropped; the lines are trimmed at their end.
 */
function logicalLines(vcard: string): string[] {
  const lines: string[] = [];
  for (const physical of vcard.replace(/^\uFEFF/, '').split(/\r\n|\r|\n/)) {
    const last = lines.length - 1;
    if ((physical.startsWith(' ') || physical.startsWith('\t')) && last >= 0) {
      lines[last] = `${lines[last] ?? ''}${physical.slice(1)}`;
    } else lines.push(physical);
  }
  return lines.map((line) => line.trimEnd());
}

/**
 * Checks a vCard holds one card with the lines docs/decisions/0017-messages-and-media.md requires: it begins with
 * BEGIN:VCARD and ends with END:VCARD (blank lines around them aside), holds no other BEGIN or END, and has FN, N and
 * TEL lines (property names may carry a group prefix such as `item1.TEL` and parameters such as `TEL;type=CELL`). A
 * folded line (RFC 6350 §3.2) belongs to the property before it: ` TEL:…` under a NOTE is part of the note, not a
 * number, so a card whose only TEL is folded into another line has none.
 * @throws DomainError invalid naming the first broken rule: `<field> must contain the line BEGIN:VCARD`, `… the line
 *   END:VCARD`, `<field> must begin with the line BEGIN:VCARD`, `<field> must end with the line END:VCARD`,
 *   `<field> must hold one card: one BEGIN:VCARD and one END:VCARD`, `<field> must contain an FN line`, `… an N line`,
 *   `… a TEL line`.
 */
export function checkVcard(vcard: string, field = 'vcard'): void {
  const lines = logicalLines(vcard).filter((line) => line.trim() !== '');
  const isBegin = (line: string) => /^BEGIN:VCARD$/i.test(line.trim());
  const isEnd = (line: string) => /^END:VCARD$/i.test(line.trim());
  if (!lines.some(isBegin)) throw errors.badRequest(`${field} must contain the line BEGIN:VCARD`);
  if (!lines.some(isEnd)) throw errors.badRequest(`${field} must contain the line END:VCARD`);
  if (!isBegin(lines[0] ?? '')) throw errors.badRequest(`${field} must begin with the line BEGIN:VCARD`);
  if (!isEnd(lines.at(-1) ?? '')) throw errors.badRequest(`${field} must end with the line END:VCARD`);
  const inner = lines.slice(1, -1);
  if (inner.some((line) => isBegin(line) || isEnd(line))) {
    throw errors.badRequest(`${field} must hold one card: one BEGIN:VCARD and one END:VCARD`);
  }
  const has = (property: string) =>
    inner.some((line) => new RegExp(`^(?:[A-Za-z0-9-]+\\.)?${property}[;:]`, 'i').test(line));
  const required: [string, string][] = [
    ['FN', 'an FN line'],
    ['N', 'an N line'],
    ['TEL', 'a TEL line'],
  ];
  for (const [property, line] of required) {
    if (!has(property)) throw errors.badRequest(`${field} must contain ${line}`);
  }
}

/**
 * Checks a poll beyond its count and lengths (docs/decisions/0026-chats-edits-polls-and-calls.md): its question
 * `name` not blank, as no option may be (the poll would show none), each option name once (a vote names an option by
 * the SHA-256 of its name, so two alike could not be told apart), and `selectableCount` at most the number of options.
 * @throws DomainError invalid `name must not be blank`, `options must not be blank`, `options must be unique (Monday
 *   appears twice)`, `selectableCount must be 0 (any) or 1 to 3 (the number of options)`.
 */
export function checkPoll(name: string, options: readonly string[], selectableCount: number): void {
  if (name.trim() === '') throw errors.badRequest('name must not be blank');
  const seen = new Set<string>();
  for (const option of options) {
    if (option.trim() === '') throw errors.badRequest('options must not be blank');
    if (seen.has(option)) throw errors.badRequest(`options must be unique (${option} appears twice)`);
    seen.add(option);
  }
  if (selectableCount > options.length) {
    throw errors.badRequest(
      `selectableCount must be 0 (any) or 1 to ${options.length} (the number of options)`,
    );
  }
}

/** Longest poll question, characters (docs/decisions/0026-chats-edits-polls-and-calls.md). */
export const MAX_POLL_NAME = 255;
/** Longest poll option name, characters (docs/decisions/0026-chats-edits-polls-and-calls.md). */
export const MAX_POLL_OPTION = 100;
/** Longest text `body` or caption, characters (docs/decisions/0017-messages-and-media.md). */
export const MAX_TEXT_LENGTH = 65_536;
/** Longest contact display name, location name and location address, characters (`/send/contact`, `/send/location`). */
const MAX_CONTACT_NAME = 256;
const MAX_LOCATION_NAME = 256;
const MAX_LOCATION_ADDRESS = 1024;

/** Characters of `text` as the request schemas count them: code points. */
const lengthOf = (text: string): number => [...text].length;

/**
 * Checks content parley rebuilds from a stored message to send again (a forward,
 * docs/decisions/0041-forward-calls-channels.md) by the rules a send of its kind meets, which a received message was
 * never held to: its sender's app, or anyone speaking the platform's protocol, wrote it
 * (docs/decisions/0017-messages-and-media.md, docs/decisions/0026-chats-edits-polls-and-calls.md). A text or caption
 * of at most 65,536 characters, a text not empty; a location with both coordinates in range (a missing one is not
 * made 0); a contact card per {@link checkVcard}, its name at most 256 characters; a poll's question 1 to 255
 * characters and 2 to 12 options of 1 to 100 characters per {@link checkPoll}. Media files are checked from their
 * bytes elsewhere (src/media/prepare.ts `checkStoredMedia`).
 * @param content the stored content's fields (`text`: the text, caption or poll question).
 * @throws DomainError invalid naming the send's field and the rule, e.g. `options must be unique (Mon appears
 *   twice)`, `latitude must be a number from -90 to 90`, `vcard must contain a TEL line`.
 */
export function checkResend(content: {
  kind: string;
  text?: string | undefined;
  latitude?: number | undefined;
  longitude?: number | undefined;
  name?: string | undefined;
  address?: string | undefined;
  vcard?: string | undefined;
  poll?: { options: readonly string[]; selectableCount: number } | undefined;
}): void {
  const text = content.text ?? '';
  switch (content.kind) {
    case 'text':
      if (text === '') throw errors.badRequest('body must not be empty');
      if (lengthOf(text) > MAX_TEXT_LENGTH) throw errors.badRequest('body must be at most 65,536 characters');
      return;
    case 'location': {
      const { latitude, longitude } = content;
      if (latitude === undefined || !(latitude >= -90 && latitude <= 90)) {
        throw errors.badRequest('latitude must be a number from -90 to 90');
      }
      if (longitude === undefined || !(longitude >= -180 && longitude <= 180)) {
        throw errors.badRequest('longitude must be a number from -180 to 180');
      }
      if (lengthOf(content.name ?? '') > MAX_LOCATION_NAME) {
        throw errors.badRequest(`name must be at most ${MAX_LOCATION_NAME} characters`);
      }
      if (lengthOf(content.address ?? '') > MAX_LOCATION_ADDRESS) {
        throw errors.badRequest('address must be at most 1,024 characters');
      }
      return;
    }
    case 'contact':
      if (lengthOf(content.name ?? '') > MAX_CONTACT_NAME) {
        throw errors.badRequest(`name must be at most ${MAX_CONTACT_NAME} characters`);
      }
      checkVcard(content.vcard ?? '');
      return;
    case 'poll': {
      const options = content.poll?.options ?? [];
      if (text === '' || lengthOf(text) > MAX_POLL_NAME) {
        throw errors.badRequest(`name must be 1 to ${MAX_POLL_NAME} characters`);
      }
      if (options.length < 2 || options.length > MAX_POLL_OPTIONS) {
        throw errors.badRequest(`options must have 2 to ${MAX_POLL_OPTIONS} items`);
      }
      if (options.some((option) => lengthOf(option) > MAX_POLL_OPTION)) {
        throw errors.badRequest(`options must be 1 to ${MAX_POLL_OPTION} characters`);
      }
      checkPoll(text, options, content.poll?.selectableCount ?? 0);
      return;
    }
    default:
      if (lengthOf(text) > MAX_TEXT_LENGTH)
        throw errors.badRequest('caption must be at most 65,536 characters');
  }
}
