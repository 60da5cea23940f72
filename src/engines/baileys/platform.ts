import { Agent } from 'node:https';
import { rootCertificates } from 'node:tls';
import { WA_CERT_DETAILS } from 'baileys';

/**
 * Where the live engine connects when the operator points parley at a platform simulator
 * (docs/decisions/0007-simulator.md: `PLATFORM_URL`, `PLATFORM_ROOT_KEY`). Both undefined in production: Baileys' own
 * defaults then apply.
 */
export interface PlatformEndpoint {
  /** WebSocket URL (`ws://` or `wss://`) passed to every socket as Baileys' `waWebSocketUrl`. */
  url: string | undefined;
  /** 32-byte curve25519 public key trusted as the Noise certificate root instead of the platform's. */
  rootKey: Buffer | undefined;
  /**
   * PEM of the certificate authority of the simulator's media server (`PLATFORM_CA_FILE`), trusted in addition
   * to the system's CAs for media uploads only ({@link mediaUploadAgent}). Undefined: the system's CAs alone.
   */
  ca?: string | Buffer;
}

/**
 * The HTTPS agent Baileys uploads media with (its `fetchAgent` option, passed to Node's https.request in
 * Utils/messages-media.js `uploadWithNodeHttp`), trusting `ca` besides Node's bundled root certificates; parley's
 * media downloads (media-download.ts) use the same agent. Certificate verification stays on; only this agent,
 * not the process, learns the extra CA.
 */
export function mediaUploadAgent(ca: string | Buffer): Agent {
  return new Agent({ ca: [...rootCertificates, ca.toString()], keepAlive: false });
}

/**
 * Trusts `rootKey` as the Noise certificate root for every Baileys socket in this process. Baileys checks the
 * intermediate certificate of the server's Noise hello against `WA_CERT_DETAILS.PUBLIC_KEY`, a 32-byte
 * curve25519 public key as a Buffer (lib/Utils/noise-handler.js; its Curve.verify adds the 0x05 type byte).
 * The setting is process-wide, as Baileys keeps it in an exported object: one root per process.
 * Note: Baileys 7.0.0-rc14's Curve.verify returns true unless the key or signature is malformed (it ignores the
 * boolean libsignal's verifySignature returns), so today Baileys does not actually refuse a wrong root; the
 * key is set anyway so that the chain verifies once Baileys checks it.
 * @throws RangeError when `rootKey` is not 32 bytes.
 */
export function trustPlatformRoot(rootKey: Buffer): void {
  if (rootKey.length !== 32)
    throw new RangeError(`platform root key must be 32 bytes, got ${rootKey.length}`);
  WA_CERT_DETAILS.PUBLIC_KEY = Buffer.from(rootKey);
}
