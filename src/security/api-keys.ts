import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { crc32 } from 'node:zlib';
import type { Environment } from '../domain/environment.ts';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_LENGTH = 32;
const CHECKSUM_LENGTH = 6;
const KEY_PATTERN = /^svc_(live|test)_([0-9A-Za-z]{32})([0-9A-Za-z]{6})$/;
/** Characters of the key kept in clear for display (docs/decisions/0003-scopes-and-keys.md). */
export const DISPLAY_PREFIX_LENGTH = 12;

function toBase62(value: number, width: number): string {
  let out = '';
  let rest = value;
  while (rest > 0) {
    out = BASE62.charAt(rest % 62) + out;
    rest = Math.floor(rest / 62);
  }
  return out.padStart(width, '0');
}

function randomBase62(length: number): string {
  // Rejection sampling keeps every character uniform: bytes >= 248 (= 4 * 62) are discarded.
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62.charAt(byte % 62);
    }
  }
  return out;
}

function checksum(random: string): string {
  return toBase62(crc32(Buffer.from(random, 'ascii')), CHECKSUM_LENGTH);
}

/** A freshly generated key: the full value (shown once), its SHA-256 hex digest and display prefix. */
export interface GeneratedKey {
  key: string;
  hash: string;
  prefix: string;
}

/**
 * Generates an API key `svc_<env>_` + 32 base62 random characters + 6 base62 characters of CRC32 over the
 * random part (docs/decisions/0003-scopes-and-keys.md). Only {@link GeneratedKey.hash} and {@link
 * GeneratedKey.prefix} may be stored.
 */
export function generateApiKey(env: Environment): GeneratedKey {
  const random = randomBase62(RANDOM_LENGTH);
  const key = `svc_${env}_${random}${checksum(random)}`;
  return { key, hash: hashApiKey(key), prefix: key.slice(0, DISPLAY_PREFIX_LENGTH) };
}

/**
 * Checks a presented key's shape and checksum without any store lookup (docs/decisions/0003-scopes-and-keys.md).
 * @returns the key's environment, or `null` when the key is malformed or its checksum is wrong.
 */
export function parseApiKey(key: string): { env: Environment } | null {
  const match = KEY_PATTERN.exec(key);
  if (!match) return null;
  const [, env, random, sum] = match;
  if (random === undefined || sum === undefined || (env !== 'live' && env !== 'test')) return null;
  const expected = Buffer.from(checksum(random), 'ascii');
  if (!timingSafeEqual(expected, Buffer.from(sum, 'ascii'))) return null;
  return { env };
}

/**
 * SHA-256 of a key's UTF-8 bytes as lowercase hex: the only form keys are stored in
 * (docs/decisions/0020-security-promises.md). Node's one-shot `crypto.hash` (a half to a third of a hash object's cost: it
 * runs at every authenticated request).
 */
export function hashApiKey(key: string): string {
  return hash('sha256', key, 'hex');
}

/** Constant-time equality of two hex digests of equal length (docs/decisions/0020-security-promises.md). */
export function digestsEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}
