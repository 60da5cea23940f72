import type { Jid } from './messages.ts';

/**
 * LIDs: the platform's privacy addresses for users (`<digits>@lid`), and the phone↔LID pairs parley keeps
 * (docs/decisions/0038-lid-mappings.md, docs/decisions/0025-live-engine.md).
 */

/** The LID JID domain (`<digits>@lid`). */
export const LID_DOMAIN = 'lid';

/** Digits of a LID as the API accepts it: 1 to 20 digits (docs/decisions/0038-lid-mappings.md). */
export const LID_DIGITS = '[0-9]{1,20}';

/** A `<digits>@lid` address as the API accepts it in `phone` and `lid` fields (docs/decisions/0038-lid-mappings.md). */
export const LID_ADDRESS = new RegExp(`^${LID_DIGITS}@${LID_DOMAIN}$`);

/**
 * One phone↔LID pair the platform told an instance: `lid` and `phone` are digits only (no domain, no device
 * part), as stored in `lid_mappings` (docs/decisions/0038-lid-mappings.md).
 */
export interface LidMapping {
  lid: string;
  phone: string;
}

/** The LID JID of LID digits: `123` → `123@lid`. */
export function lidJid(lid: string): Jid {
  return `${lid}@${LID_DOMAIN}`;
}

/** True for a `<digits>@lid` address without device part (the form sends accept in `phone`). */
export function isLidAddress(address: string): boolean {
  return LID_ADDRESS.test(address);
}

/** The digits of a LID JID, dropping any device part (`123:4@lid` → `123`); null for anything else. */
export function lidOfJid(jid: string): string | null {
  const match = /^(\d{1,20})(?::\d+)?@lid$/.exec(jid);
  return match?.[1] ?? null;
}

/**
 * The LID digits of a `lid` query value (`GET /v1/contacts/lid`): digits, or digits followed by `@lid`; null when
 * the value is neither (docs/decisions/0038-lid-mappings.md).
 */
export function parseLid(value: string): string | null {
  const digits = value.endsWith(`@${LID_DOMAIN}`) ? value.slice(0, -`@${LID_DOMAIN}`.length) : value;
  return new RegExp(`^${LID_DIGITS}$`).test(digits) ? digits : null;
}
