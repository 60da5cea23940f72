import { errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import { phoneOfJid } from '../domain/messages.ts';
import type { Store } from '../store/database.ts';
import { listRecentPeerJids } from '../store/messages.ts';

/**
 * Status updates (stories), docs/api.md#status and docs/decisions/0044-status-stories.md: a status is a send like
 * any other — a message to `status@broadcast`, stored as a send job and relayed by the send queue
 * (docs/decisions/0009-sends-as-jobs.md) — whose audience, the `statusJidList` Baileys relays it to
 * (Socket/messages-send.js relayMessage), this service decides.
 */

/** Most phone numbers one status is shown to (docs/decisions/0044-status-stories.md). */
export const MAX_STATUS_AUDIENCE = 1000;

/**
 * The fonts a status text may use: WhatsApp's ExtendedTextMessage.FontType numbers (Baileys WAProto: SYSTEM 0,
 * SYSTEM_TEXT 1, FB_SCRIPT 2, SYSTEM_BOLD 6, MORNINGBREEZE_REGULAR 7, CALISTOGA_REGULAR 8, EXO2_EXTRABOLD 9,
 * COURIERPRIME_BOLD 10).
 */
export const STATUS_FONTS: readonly number[] = [0, 1, 2, 6, 7, 8, 9, 10];

/**
 * The background colour of a status text as the platform carries it (extendedTextMessage.backgroundArgb): an
 * unsigned 32-bit 0xAARRGGBB. `#RRGGBB` is opaque (alpha FF), `#AARRGGBB` as given — the reading of Baileys'
 * `assertColor` (Utils/messages.js).
 * @throws DomainError invalid `backgroundColor must be a colour #RRGGBB or #AARRGGBB` for anything else.
 */
export function backgroundArgbOf(color: string): number {
  const match = /^#([0-9A-Fa-f]{6}|[0-9A-Fa-f]{8})$/.exec(color);
  if (!match?.[1]) throw errors.badRequest('backgroundColor must be a colour #RRGGBB or #AARRGGBB');
  const hex = match[1].length === 6 ? `FF${match[1]}` : match[1];
  return Number.parseInt(hex, 16);
}

/**
 * Checks the `font` of a status text is one of {@link STATUS_FONTS}.
 * @throws DomainError invalid `font must be one of 0, 1, 2, 6, 7, 8, 9, 10`.
 */
export function checkStatusFont(font: number | undefined): void {
  if (font !== undefined && !STATUS_FONTS.includes(font)) {
    throw errors.badRequest(`font must be one of ${STATUS_FONTS.join(', ')}`);
  }
}

/** Decides who sees a status (docs/decisions/0044-status-stories.md). */
export class StatusService {
  readonly #store: Store;

  constructor(deps: { store: Store }) {
    this.#store = deps.store;
  }

  /**
   * The phone numbers (digits) a status of `instance` is shown to. Given `contacts`, those numbers (unique, not the
   * instance's own). Omitted, the users parley knows for the instance: the {@link MAX_STATUS_AUDIENCE} users it
   * exchanged messages with most recently (its stored chat peers — one-to-one chats, and the authors of group
   * messages it received), the instance's own number left out. Registration is not checked: the platform shows
   * a status to the users it has devices for.
   * @throws DomainError not_logged_in before the account is linked; invalid `contacts must be unique`,
   *   `contacts must not include the instance's own number <phone>`; conflict `no contacts to show the status to:
   *   the instance has exchanged no messages yet; name them in contacts` when the default audience is empty.
   */
  async audience(instance: Instance, contacts: readonly string[] | undefined): Promise<string[]> {
    if (instance.jid === null) throw errors.notLoggedIn();
    const own = instance.phone;
    if (contacts !== undefined) {
      if (new Set(contacts).size !== contacts.length) throw errors.badRequest('contacts must be unique');
      if (own !== null && contacts.includes(own)) {
        throw errors.badRequest(`contacts must not include the instance's own number ${own}`);
      }
      return [...contacts];
    }
    const peers = await listRecentPeerJids(this.#store.db, instance.id, MAX_STATUS_AUDIENCE + 1);
    const phones = peers
      .map(phoneOfJid)
      .filter((phone): phone is string => phone !== null && phone !== own)
      .slice(0, MAX_STATUS_AUDIENCE);
    if (phones.length === 0) {
      throw errors.conflict(
        'no contacts to show the status to: the instance has exchanged no messages yet; name them in contacts',
      );
    }
    return phones;
  }
}
