/**
 * The account's own profile, privacy settings and blocklist (docs/api.md#profile,
 * docs/decisions/0039-profile-privacy-blocklist.md). The privacy values are the platform's, as Baileys 7 names them
 * (Types/Chat.d.ts `WAPrivacyValue`, `WAPrivacyOnlineValue`, `WAPrivacyGroupAddValue`, `WAReadReceiptsValue`) and
 * as the `privacy` iq carries them (`<category name="last" value="contacts"/>`).
 */

/** The account's profile as the platform shows it to others. */
export interface AccountProfile {
  /** The push name (display name) others see; '' when unknown. */
  name: string;
  /** The about text; '' when none. */
  about: string;
  /** URL of the profile picture (the platform's, expiring); null when the account has none. */
  pictureUrl: string | null;
}

/** A new profile picture: image bytes and their detected MIME type (JPEG, PNG, GIF or WEBP). */
export interface ProfilePicture {
  data: Buffer;
  mimetype: string;
}

/** The changes of `PUT /v1/profile`; omitted fields are kept. */
export interface ProfileChange {
  name?: string;
  about?: string;
  picture?: ProfilePicture;
}

/** Longest push name the platform accepts, characters (WhatsApp's profile name limit). */
export const MAX_PROFILE_NAME = 25;
/** Longest about text the platform accepts, characters (WhatsApp's about limit). */
export const MAX_PROFILE_ABOUT = 139;

/** Who may see something: everyone, contacts, contacts except those excluded, nobody (`WAPrivacyValue`). */
export const VISIBILITY_VALUES = ['all', 'contacts', 'contact_blacklist', 'none'] as const;
/** Who sees the account online: everyone, or the same people as last seen (`WAPrivacyOnlineValue`). */
export const ONLINE_VALUES = ['all', 'match_last_seen'] as const;
/** Who may add the account to groups (`WAPrivacyGroupAddValue`). */
export const GROUP_ADD_VALUES = ['all', 'contacts', 'contact_blacklist'] as const;
/** Whether read receipts are sent (`WAReadReceiptsValue`). */
export const READ_RECEIPTS_VALUES = ['all', 'none'] as const;

/** The account's privacy settings, by parley's field names (docs/api.md#profile). */
export interface PrivacySettings {
  lastSeen: (typeof VISIBILITY_VALUES)[number];
  online: (typeof ONLINE_VALUES)[number];
  profilePicture: (typeof VISIBILITY_VALUES)[number];
  about: (typeof VISIBILITY_VALUES)[number];
  groupAdd: (typeof GROUP_ADD_VALUES)[number];
  readReceipts: (typeof READ_RECEIPTS_VALUES)[number];
}

/** A subset of the privacy settings to change (`PUT /v1/profile/privacy`). */
export type PrivacyChange = Partial<PrivacySettings>;

/** The allowed values of every privacy setting, by field. */
export const PRIVACY_VALUES: { [K in keyof PrivacySettings]: readonly PrivacySettings[K][] } = {
  lastSeen: VISIBILITY_VALUES,
  online: ONLINE_VALUES,
  profilePicture: VISIBILITY_VALUES,
  about: VISIBILITY_VALUES,
  groupAdd: GROUP_ADD_VALUES,
  readReceipts: READ_RECEIPTS_VALUES,
};

/**
 * The platform's category name of each setting (the `name` of a `privacy` iq's `<category>`, Baileys
 * Socket/chats.js `privacyQuery`).
 */
export const PRIVACY_CATEGORIES: { [K in keyof PrivacySettings]: string } = {
  lastSeen: 'last',
  online: 'online',
  profilePicture: 'profile',
  about: 'status',
  groupAdd: 'groupadd',
  readReceipts: 'readreceipts',
};

/**
 * The settings a new account has (the simulator's and the sandbox's defaults): everyone sees everything except
 * the about text, which contacts see.
 */
export const DEFAULT_PRIVACY: PrivacySettings = {
  lastSeen: 'all',
  online: 'all',
  profilePicture: 'all',
  about: 'contacts',
  groupAdd: 'all',
  readReceipts: 'all',
};

/**
 * Reads settings from the platform's category dictionary (`{ last: 'all', … }`); a missing or unknown value
 * takes the default, so an answer from a newer platform never breaks the read.
 */
export function privacyFromCategories(
  categories: Readonly<Record<string, string | undefined>>,
): PrivacySettings {
  const out = { ...DEFAULT_PRIVACY };
  for (const field of Object.keys(PRIVACY_CATEGORIES) as (keyof PrivacySettings)[]) {
    const value = categories[PRIVACY_CATEGORIES[field]];
    if (value !== undefined && (PRIVACY_VALUES[field] as readonly string[]).includes(value)) {
      (out as Record<string, string>)[field] = value;
    }
  }
  return out;
}
