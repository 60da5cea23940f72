import { randomBytes } from 'node:crypto';
import { hash, verify } from '@node-rs/argon2';

/**
 * Argon2id parameters for dashboard passwords: OWASP's Password Storage Cheat Sheet first choice for Argon2id
 * (19 MiB, 2 passes, 1 lane). `algorithm: 2` is `Algorithm.Argon2id` of @node-rs/argon2 (a `const enum`, which
 * isolated modules cannot import), also its default.
 */
const OPTIONS = { algorithm: 2, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

/** Shortest password accepted for a dashboard user, characters. */
export const MIN_PASSWORD_LENGTH = 12;

/** Hashes a password with Argon2id into a PHC string (`$argon2id$v=19$m=19456,t=2,p=1$…`). */
export function hashPassword(password: string): Promise<string> {
  return hash(password, OPTIONS);
}

/**
 * Whether `password` matches the PHC string `stored` (constant-time comparison inside the binding). A malformed
 * stored hash is a mismatch, never an exception.
 */
export async function verifyPassword(stored: string, password: string): Promise<boolean> {
  try {
    return await verify(stored, password);
  } catch {
    return false;
  }
}

let decoy: Promise<string> | undefined;
/**
 * A hash of a random password nobody knows, made once per process: verified against when the e-mail is unknown, so
 * an unknown user costs the same Argon2id work as a wrong password (the answer's timing does not reveal which).
 */
export function decoyHash(): Promise<string> {
  decoy ??= hashPassword(randomBytes(24).toString('base64url'));
  return decoy;
}

/** A random password for a generated user: 20 base64url characters (120 bits). */
export function generatePassword(): string {
  return randomBytes(15).toString('base64url');
}
