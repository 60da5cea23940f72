/**
 * The media server's TLS identity: a certificate authority created at every start of the simulator (as its
 * Noise root is) and a server certificate it issues for 127.0.0.1, ::1 and localhost. Clients trust the CA
 * certificate only for the simulator's media hosts (parley: `PLATFORM_CA_FILE`, handed to Baileys as its
 * upload agent's `ca`), never by turning verification off. Generated with the `selfsigned` package (EC P-256,
 * SHA-256).
 */
import { generate } from 'selfsigned';

/** PEM certificate and private key. */
export interface PemPair {
  cert: string;
  key: string;
}

/** The media server's TLS material: the CA clients trust and the server's own certificate. */
export interface MediaTls {
  /** PEM of the CA certificate (what clients add to their trusted CAs). */
  ca: string;
  /** The server certificate, issued by {@link ca}, and its key. */
  server: PemPair;
}

const DAY_MS = 86_400_000;

/** Creates a CA (valid 1 year) and a server certificate for loopback names (valid 1 year). */
export async function createMediaTls(): Promise<MediaTls> {
  const now = Date.now();
  const validity = { notBeforeDate: new Date(now - DAY_MS), notAfterDate: new Date(now + 365 * DAY_MS) };
  const ca = await generate([{ name: 'commonName', value: 'parley platform simulator media CA' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    ...validity,
    extensions: [
      { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  const server = await generate([{ name: 'commonName', value: '127.0.0.1' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    ...validity,
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
          { type: 2, value: 'localhost' },
        ],
      },
    ],
    ca: { cert: ca.cert, key: ca.private },
  });
  return { ca: ca.cert, server: { cert: server.cert, key: server.private } };
}
