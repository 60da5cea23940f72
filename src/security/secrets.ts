import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BoundedMap } from '../domain/bounded-map.ts';

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Raised when a sealed value cannot be opened: wrong master key, truncated or tampered data. */
export class SecretError extends Error {
  override name = 'SecretError';
}

/** Opened values a {@link SecretBox} keeps by default (see {@link SecretBoxOptions.openedEntries}). */
export const DEFAULT_OPENED_ENTRIES = 1024;

/**
 * Longest sealed text (characters) whose opened value {@link SecretBox.openKept} keeps: HMAC keys, endpoint secrets
 * and sealed URLs of ordinary length fit; a longer one is opened each time.
 */
export const MAX_KEPT_SEALED_CHARS = 512;

/** Options of a {@link SecretBox}. */
export interface SecretBoxOptions {
  /**
   * Most opened values kept in memory, a whole number (default {@link DEFAULT_OPENED_ENTRIES}; 0 or less keeps
   * none): the oldest kept goes first when it is full.
   */
  openedEntries?: number;
}

/**
 * Encrypts secrets at rest (HMAC keys, platform credentials) with AES-256-GCM under the master key
 * (docs/decisions/0020-security-promises.md). A sealed value is the text `v1.<iv>.<tag>.<ciphertext>`, each part
 * base64url.
 *
 * {@link openKept} keeps what it opened in memory by its sealed text, up to {@link SecretBoxOptions.openedEntries}
 * values of at most {@link MAX_KEPT_SEALED_CHARS} sealed characters each, so the HMAC key and endpoint secret of
 * every webhook attempt are not decrypted again for each one. GCM authenticates the sealed text, so one text opens
 * to one value under one master key: a kept value is the one opening would give. A text that does not open is never
 * kept. {@link open} keeps nothing: the platform's keys (a one-time pre-key must not outlive its deletion in memory)
 * and anything read once go through it.
 */
export class SecretBox {
  readonly #key: Buffer;
  /**
   * Opened values by sealed text, oldest kept first (read with `get`, so a use does not reorder them); undefined
   * when {@link SecretBoxOptions.openedEntries} keeps none.
   */
  readonly #opened: BoundedMap<string, string> | undefined;

  /**
   * @param key the 32-byte master key.
   * @throws SecretError when the key is not 32 bytes; RangeError when `options.openedEntries` is positive but not a
   *   whole number.
   */
  constructor(key: Buffer, options: SecretBoxOptions = {}) {
    if (key.length !== 32) throw new SecretError('master key must be 32 bytes');
    this.#key = Buffer.from(key);
    const openedEntries = options.openedEntries ?? DEFAULT_OPENED_ENTRIES;
    this.#opened = openedEntries > 0 ? new BoundedMap(openedEntries) : undefined;
  }

  /** How many opened values are kept now (at most {@link SecretBoxOptions.openedEntries}). */
  get keptCount(): number {
    return this.#opened?.size ?? 0;
  }

  /** Whether the value of `sealed` is kept now ({@link openKept}). */
  keeps(sealed: string): boolean {
    return this.#opened?.has(sealed) ?? false;
  }

  /** Encrypts `plaintext` (UTF-8) with a fresh random 96-bit IV. */
  seal(plaintext: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const tag = cipher.getAuthTag();
    return [VERSION, iv.toString('base64url'), tag.toString('base64url'), body.toString('base64url')].join(
      '.',
    );
  }

  /**
   * Decrypts a value made by {@link seal}; keeps nothing (see {@link openKept}).
   * @throws SecretError when it is malformed or fails authentication.
   */
  open(sealed: string): string {
    return this.#decrypt(sealed);
  }

  /**
   * Decrypts a value made by {@link seal} and keeps it, for a secret opened again and again (a webhook's HMAC key,
   * endpoint secret and sealed URL, at every attempt): the kept value when there is one, else the opened value,
   * kept when the sealed text has at most {@link MAX_KEPT_SEALED_CHARS} characters (the oldest kept value goes
   * first when {@link SecretBoxOptions.openedEntries} are kept).
   * @throws SecretError when it is malformed or fails authentication (nothing is kept then).
   */
  openKept(sealed: string): string {
    const kept = this.#opened?.get(sealed);
    if (kept !== undefined) return kept;
    const plaintext = this.#decrypt(sealed);
    if (sealed.length <= MAX_KEPT_SEALED_CHARS) this.#opened?.set(sealed, plaintext);
    return plaintext;
  }

  #decrypt(sealed: string): string {
    const [version, iv, tag, body] = sealed.split('.');
    if (version !== VERSION || iv === undefined || tag === undefined || body === undefined) {
      throw new SecretError('sealed value is malformed');
    }
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, Buffer.from(iv, 'base64url'));
      const tagBytes = Buffer.from(tag, 'base64url');
      if (tagBytes.length !== TAG_BYTES) throw new SecretError('sealed value is malformed');
      decipher.setAuthTag(tagBytes);
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString(
        'utf8',
      );
    } catch (error) {
      throw new SecretError('sealed value cannot be opened with this master key', { cause: error });
    }
  }
}

/**
 * Name of the master key file created in `DATA_DIR` when `SECRET_KEY` is not set
 * (docs/decisions/0020-security-promises.md).
 */
export const KEY_FILE_NAME = 'secret.key';

/**
 * Returns the master key: `configured` when given, else the key in `<dataDir>/secret.key`, which is created
 * with mode 0600 and 32 random bytes (hex) on first use. Safe when several processes start at once: the file is
 * created exclusively and a loser of the race reads the winner's key.
 * @throws SecretError when the key file exists but does not hold 64 hex characters.
 */
export function loadMasterKey(dataDir: string, configured: Buffer | undefined): Buffer {
  if (configured) return configured;
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, KEY_FILE_NAME);
  try {
    writeFileSync(path, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const text = readFileSync(path, 'utf8').trim();
  if (!/^[0-9a-f]{64}$/i.test(text)) throw new SecretError(`${path} must hold 64 hex characters`);
  return Buffer.from(text, 'hex');
}
