import { createHmac } from 'node:crypto';
import type { Avatar, Contact, UserCheck, UserInfo } from '../../domain/messages.ts';
import { userJid } from '../../domain/messages.ts';

/**
 * The users of the simulated platform (docs/decisions/0004-sandbox.md). Default world: every valid phone number (8 to
 * 15 digits) is a registered user, except numbers ending in `0000`; a user defined with `/v1/sandbox/users` overrides
 * that. Profile rules of the default world, documented here because tests and integrators rely on them:
 * - push name `User <last 4 digits>`, no first/full/business/verified name;
 * - about text `Hey there! I am using WhatsApp.`;
 * - a profile picture exactly when the number's last digit is even (see {@link hasPicture}).
 */

/** A user as defined through `/v1/sandbox/users`; omitted fields take the default world's values. */
export interface SandboxUserDefinition {
  registered?: boolean;
  pushName?: string;
  firstName?: string;
  fullName?: string;
  businessName?: string;
  verifiedName?: string;
}

/** A user of the simulated world with every field resolved. */
export interface SandboxUser {
  phone: string;
  registered: boolean;
  pushName: string;
  firstName: string;
  fullName: string;
  businessName: string;
  verifiedName: string;
}

/** The about text every sandbox user has. */
export const SANDBOX_STATUS = 'Hey there! I am using WhatsApp.';
/** Base of sandbox profile picture URLs (`.invalid` is reserved: nothing is ever served there, RFC 2606). */
export const AVATAR_BASE_URL = 'https://sandbox.parley.invalid/avatars/';

/**
 * True when `phone` is shaped like a phone number: 8 to 15 digits (docs/decisions/0001-envelope-and-error-codes.md).
 */
export function isValidPhone(phone: string): boolean {
  return /^[0-9]{8,15}$/.test(phone);
}

/**
 * The default world's registration rule (docs/decisions/0004-sandbox.md): valid numbers are registered unless they
 * end in `0000`.
 */
export function registeredByDefault(phone: string): boolean {
  return isValidPhone(phone) && !phone.endsWith('0000');
}

/** Resolves user `phone` from its definition (if any) and the default world's rules. */
export function resolveUser(phone: string, defined: SandboxUserDefinition | undefined): SandboxUser {
  const registered = isValidPhone(phone) && (defined?.registered ?? registeredByDefault(phone));
  return {
    phone,
    registered,
    pushName: defined?.pushName ?? `User ${phone.slice(-4)}`,
    firstName: defined?.firstName ?? '',
    fullName: defined?.fullName ?? '',
    businessName: defined?.businessName ?? '',
    verifiedName: defined?.verifiedName ?? '',
  };
}

/** Whether a registered user has a profile picture in the default world: the number's last digit is even. */
export function hasPicture(user: SandboxUser): boolean {
  const last = Number(user.phone.at(-1));
  return user.registered && Number.isInteger(last) && last % 2 === 0;
}

function pictureIdOf(phone: string): string {
  const n = createHmac('sha256', 'parley-sandbox-avatar').update(phone).digest().readUInt32BE(0);
  return String(1_600_000_000 + (n % 100_000_000));
}

/** The user's profile picture (`{AVATAR_BASE_URL}<phone>.jpg?id=<id>`), or null when it has none. */
export function avatarOf(user: SandboxUser): Avatar | null {
  if (!hasPicture(user)) return null;
  const id = pictureIdOf(user.phone);
  return { url: `${AVATAR_BASE_URL}${user.phone}.jpg?id=${id}`, id };
}

/** A registration check entry (docs/api.md#contacts). */
export function checkOf(query: string, user: SandboxUser): UserCheck {
  return {
    query,
    isInPlatform: user.registered,
    jid: user.registered ? userJid(user.phone) : null,
    verifiedName: user.registered ? user.verifiedName : '',
  };
}

/**
 * Profile details (docs/api.md#contacts `/v1/contacts/info`); an unregistered number has a null JID and empty fields.
 */
export function infoOf(query: string, user: SandboxUser): UserInfo {
  if (!user.registered) return { query, jid: null, status: '', pictureId: '', verifiedName: '' };
  return {
    query,
    jid: userJid(user.phone),
    status: SANDBOX_STATUS,
    pictureId: avatarOf(user)?.id ?? '',
    verifiedName: user.verifiedName,
  };
}

/** A contact entry (docs/api.md#contacts, without `found`). */
export function contactOf(user: SandboxUser): Contact {
  return {
    jid: userJid(user.phone),
    businessName: user.businessName,
    firstName: user.firstName,
    fullName: user.fullName,
    pushName: user.pushName,
  };
}
