import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { generate } from 'selfsigned';
import { CliError } from './errors.ts';

/**
 * The certificates of `parley listen`: a local CA kept in a directory (by default DATA_DIR), which parley trusts
 * through OUTBOUND_CA_FILE, and a server certificate it issues for each run of the listener. Generated with the
 * `selfsigned` package (X.509 through WebCrypto).
 */

/** File name of the local CA's certificate in its directory (what parley's OUTBOUND_CA_FILE names). */
export const CA_CERT_FILE = 'listen-ca.pem';
/** File name of the local CA's private key, beside {@link CA_CERT_FILE} (never leaves that directory). */
export const CA_KEY_FILE = 'listen-ca-key.pem';

const DAY_MS = 86_400_000;

/** A CA certificate and its private key, PEM. */
export interface PemPair {
  cert: string;
  key: string;
}

/** The local CA: its PEM pair and where its certificate is stored. */
export interface LocalCa extends PemPair {
  certPath: string;
  /** True when this call created it (parley must be restarted with OUTBOUND_CA_FILE to trust it). */
  created: boolean;
}

/** Why the file system refused the CA directory, in words, by error code. */
const CA_DIR_REASONS: Record<string, string> = {
  ENOTDIR: 'a part of the path is a file, not a directory',
  EISDIR: 'a CA file name there is a directory',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EROFS: 'the file system is read-only',
  ENOSPC: 'no space left',
  EEXIST: `it holds one of ${CA_CERT_FILE} and ${CA_KEY_FILE} without the other: remove it or choose another directory`,
};

/**
 * The local CA in `dir`: read when `listen-ca.pem` and `listen-ca-key.pem` exist, else created (EC P-256,
 * SHA-256, valid 10 years; the key file mode 0600). Creation uses exclusive writes, so two concurrent first runs
 * cannot leave a certificate beside another run's key.
 * @throws CliError naming `--ca-dir`, the directory and the reason when the file system refuses it (not a directory,
 *   not writable, read-only, partial files: docs/cli.md).
 */
export async function ensureLocalCa(dir: string): Promise<LocalCa> {
  try {
    return await openOrCreateLocalCa(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (typeof code !== 'string' || !/^E[A-Z]+$/.test(code)) throw error;
    const reason = CA_DIR_REASONS[code] ?? code;
    throw new CliError(
      `--ca-dir ${dir}: cannot keep the local CA there (${reason}); set --ca-dir to a directory this user can write (default: DATA_DIR)`,
    );
  }
}

async function openOrCreateLocalCa(dir: string): Promise<LocalCa> {
  const certPath = join(dir, CA_CERT_FILE);
  const keyPath = join(dir, CA_KEY_FILE);
  try {
    return {
      cert: readFileSync(certPath, 'utf8'),
      key: readFileSync(keyPath, 'utf8'),
      certPath,
      created: false,
    };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  mkdirSync(dir, { recursive: true });
  const now = Date.now();
  const pems = await generate([{ name: 'commonName', value: 'parley listen local CA' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: new Date(now - DAY_MS),
    notAfterDate: new Date(now + 3650 * DAY_MS),
    extensions: [
      { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  writeFileSync(keyPath, pems.private, { mode: 0o600, flag: 'wx' });
  writeFileSync(certPath, pems.cert, { flag: 'wx' });
  return { cert: pems.cert, key: pems.private, certPath, created: true };
}

/**
 * A server certificate for `host` (plus `localhost`, 127.0.0.1 and ::1), issued by `ca`, valid 30 days,
 * with a key pair generated for this run.
 */
export async function issueServerCertificate(ca: PemPair, host: string): Promise<PemPair> {
  const names = new Set(['localhost', '127.0.0.1', '::1', host]);
  const altNames = [...names].map((name) =>
    isIP(name) === 0 ? { type: 2 as const, value: name } : { type: 7 as const, ip: name },
  );
  const now = Date.now();
  const pems = await generate([{ name: 'commonName', value: host }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: new Date(now - DAY_MS),
    notAfterDate: new Date(now + 30 * DAY_MS),
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames },
    ],
    ca,
  });
  return { cert: pems.cert, key: pems.private };
}
