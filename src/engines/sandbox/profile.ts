import { createHash } from 'node:crypto';
import { DomainError, errors } from '../../domain/errors.ts';
import {
  type AccountProfile,
  DEFAULT_PRIVACY,
  type PrivacyChange,
  type PrivacySettings,
  type ProfileChange,
} from '../../domain/profile.ts';
import type { AuthStateStore } from '../engine.ts';
import { ACCOUNT_CATEGORY, changeSerially, type SandboxAccount, type SandboxCredentials } from './account.ts';
import { AVATAR_BASE_URL, SANDBOX_STATUS } from './users.ts';

/**
 * The account's own profile, privacy settings and blocklist on the simulated platform
 * (docs/decisions/0039-profile-privacy-blocklist.md). Kept in the session's auth port (category `sandbox-account`,
 * one entry per account phone and kind), so they survive restarts and a logout, and a login as another number starts
 * from the defaults: the push name given at login, the default world's about text, no picture, the platform's default
 * privacy settings ({@link DEFAULT_PRIVACY}), nobody blocked.
 */

const CATEGORY = ACCOUNT_CATEGORY;

/** The profile as stored: the picture is kept as its id and MIME type (the bytes are not needed to show it). */
interface StoredProfile {
  name: string;
  about: string;
  picture: { id: string; mimetype: string } | null;
}

async function read<T>(account: SandboxAccount, id: string): Promise<T | undefined> {
  const value = (await account.context.auth.get(CATEGORY, [id])).get(id);
  return value === undefined ? undefined : (JSON.parse(value) as T);
}

async function write(account: SandboxAccount, id: string, value: unknown): Promise<void> {
  await account.context.auth.set([{ category: CATEGORY, id, value: JSON.stringify(value) }]);
}

async function storedProfile(account: SandboxAccount, creds: SandboxCredentials): Promise<StoredProfile> {
  return (
    (await read<StoredProfile>(account, `profile:${creds.phone}`)) ?? {
      name: creds.pushName,
      about: SANDBOX_STATUS,
      picture: null,
    }
  );
}

function shown(creds: SandboxCredentials, profile: StoredProfile): AccountProfile {
  const picture = profile.picture;
  return {
    name: profile.name,
    about: profile.about,
    pictureUrl: picture ? `${AVATAR_BASE_URL}${creds.phone}.jpg?id=${picture.id}` : null,
  };
}

/**
 * The name account `phone` set for itself, if it ever did: a new login of the number starts with it as its push
 * name, as the platform keeps the profile across logins.
 */
export async function savedName(auth: AuthStateStore, phone: string): Promise<string | undefined> {
  const id = `profile:${phone}`;
  const value = (await auth.get(CATEGORY, [id])).get(id);
  return value === undefined ? undefined : (JSON.parse(value) as StoredProfile).name;
}

/** The account's profile (`{AVATAR_BASE_URL}<phone>.jpg?id=<id>` for a picture it set, else null). */
export async function profile(account: SandboxAccount): Promise<AccountProfile> {
  const creds = await account.ready();
  return shown(creds, await storedProfile(account, creds));
}

/**
 * Applies `change`; a new picture gets an id derived from its bytes (the same picture twice keeps its id, as the
 * platform's picture ids change only with the picture).
 */
export function updateProfile(account: SandboxAccount, change: ProfileChange): Promise<AccountProfile> {
  return changeSerially(account, () => changeProfile(account, change));
}

async function changeProfile(account: SandboxAccount, change: ProfileChange): Promise<AccountProfile> {
  const creds = await account.ready();
  const current = await storedProfile(account, creds);
  const next: StoredProfile = {
    name: change.name ?? current.name,
    about: change.about ?? current.about,
    picture: change.picture
      ? {
          id: String(
            1_600_000_000 +
              (createHash('sha256').update(change.picture.data).digest().readUInt32BE(0) % 100_000_000),
          ),
          mimetype: change.picture.mimetype,
        }
      : current.picture,
  };
  await write(account, `profile:${creds.phone}`, next);
  return shown(creds, next);
}

/** The account's privacy settings ({@link DEFAULT_PRIVACY} until changed). */
export async function privacy(account: SandboxAccount): Promise<PrivacySettings> {
  const creds = await account.ready();
  return { ...DEFAULT_PRIVACY, ...(await read<PrivacyChange>(account, `privacy:${creds.phone}`)) };
}

/** Changes the given privacy settings and returns them all. */
export function updatePrivacy(account: SandboxAccount, change: PrivacyChange): Promise<PrivacySettings> {
  return changeSerially(account, () => changePrivacy(account, change));
}

async function changePrivacy(account: SandboxAccount, change: PrivacyChange): Promise<PrivacySettings> {
  const creds = await account.ready();
  const next = {
    ...DEFAULT_PRIVACY,
    ...(await read<PrivacyChange>(account, `privacy:${creds.phone}`)),
    ...change,
  };
  await write(account, `privacy:${creds.phone}`, next);
  return next;
}

async function storedBlocklist(account: SandboxAccount, creds: SandboxCredentials): Promise<string[]> {
  return (await read<string[]>(account, `blocklist:${creds.phone}`)) ?? [];
}

/** The phones the account blocked, ascending. */
export async function blocklist(account: SandboxAccount): Promise<string[]> {
  return storedBlocklist(account, await account.ready());
}

/**
 * True when the logged-in account blocked `phone`: the simulated platform then drops that user's 1:1 messages and
 * chat state before they reach the account, as the platform does (a blocked user's messages are never delivered;
 * group messages still are). Reads the store; call only after `account.ready()`.
 */
export async function isBlocked(
  account: SandboxAccount,
  creds: SandboxCredentials,
  phone: string,
): Promise<boolean> {
  return (await storedBlocklist(account, creds)).includes(phone);
}

/**
 * Blocks or unblocks `phone`; idempotent. Returns the blocklist afterwards.
 * @throws DomainError invalid when `phone` is the account; not_registered when it is not on the platform.
 */
export function setBlocked(
  account: SandboxAccount,
  phone: string,
  action: 'block' | 'unblock',
): Promise<string[]> {
  return changeSerially(account, () => changeBlocked(account, phone, action));
}

async function changeBlocked(
  account: SandboxAccount,
  phone: string,
  action: 'block' | 'unblock',
): Promise<string[]> {
  const creds = await account.ready();
  if (phone === creds.phone) throw errors.badRequest('phone must be another user than this instance');
  const user = await account.world.user(phone);
  if (!user.registered)
    throw new DomainError('not_registered', `phone ${phone} is not registered on the platform`);
  const current = new Set(await storedBlocklist(account, creds));
  if (action === 'block') current.add(phone);
  else current.delete(phone);
  const next = [...current].sort();
  await write(account, `blocklist:${creds.phone}`, next);
  return next;
}
