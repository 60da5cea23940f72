/**
 * The simulator's Noise certificate chain, as Baileys' Utils/noise-handler.js verifies it in processHandshake:
 * a root key pair (the simulator's stand-in for the platform's long-term key, trusted by the client through
 * `WA_CERT_DETAILS.PUBLIC_KEY`) signs an intermediate certificate whose details carry
 * `issuerSerial = WA_CERT_DETAILS.SERIAL`; the intermediate's key signs the leaf, whose key is the server's
 * static Noise key. Keys are curve25519 (32-byte public keys without the 0x05 type byte), signatures are
 * XEdDSA as libsignal's curve computes them.
 */
import { Curve, proto, WA_CERT_DETAILS } from 'baileys';
import * as curve from 'libsignal/src/curve.js';

/** A curve25519 key pair: `public` is 32 bytes (no 0x05 prefix), `private` 32 bytes. */
export interface KeyPair {
  public: Buffer;
  private: Buffer;
}

/** The keys and the encoded CertChain a simulator serves in every server hello. */
export interface CertificateChain {
  /** The root key pair; its public half is what clients trust (hex in `parley sim --json`). */
  root: KeyPair;
  /** The server's static Noise key pair; its public half is the leaf certificate's key. */
  serverStatic: KeyPair;
  /** proto.CertChain encoded, the plaintext of the server hello's `payload`. */
  encoded: Buffer;
}

/** A fresh curve25519 key pair as Buffers (Baileys' Curve.generateKeyPair, libsignal's curve). */
export function generateKeyPair(): KeyPair {
  const pair = Curve.generateKeyPair();
  return { public: Buffer.from(pair.public), private: Buffer.from(pair.private) };
}

/**
 * Verifies an XEdDSA signature by a 32-byte curve25519 public key with libsignal's curve; false for a wrong
 * signature or a malformed key or signature. (Baileys 7's `Curve.verify` ignores libsignal's boolean result and
 * accepts any well-formed signature, so the simulator never relies on it.)
 */
export function verifySignature(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  try {
    const key =
      publicKey.length === 33 ? Buffer.from(publicKey) : Buffer.concat([Buffer.from([5]), publicKey]);
    return curve.verifySignature(key, Buffer.from(message), Buffer.from(signature)) === true;
  } catch {
    return false;
  }
}

/** Serial of the simulator's intermediate certificate (any value; Baileys only checks the issuer serial). */
const INTERMEDIATE_SERIAL = 1;
/** Validity window of both certificates, in seconds: ten years from creation. */
const VALIDITY_SECONDS = 10 * 365 * 24 * 3600;

function signedCertificate(
  signer: KeyPair,
  details: proto.CertChain.NoiseCertificate.IDetails,
): proto.CertChain.INoiseCertificate {
  const encodedDetails = Buffer.from(proto.CertChain.NoiseCertificate.Details.encode(details).finish());
  return { details: encodedDetails, signature: Buffer.from(Curve.sign(signer.private, encodedDetails)) };
}

/**
 * Creates a certificate chain. Pass `root` to keep a root key across restarts (clients pinned to it keep
 * trusting the simulator); otherwise a fresh root is generated.
 */
export function createCertificateChain(root: KeyPair = generateKeyPair()): CertificateChain {
  const intermediateKey = generateKeyPair();
  const serverStatic = generateKeyPair();
  const now = Math.floor(Date.now() / 1000);
  const intermediate = signedCertificate(root, {
    serial: INTERMEDIATE_SERIAL,
    issuerSerial: WA_CERT_DETAILS.SERIAL,
    key: intermediateKey.public,
    notBefore: now,
    notAfter: now + VALIDITY_SECONDS,
  });
  const leaf = signedCertificate(intermediateKey, {
    serial: INTERMEDIATE_SERIAL + 1,
    issuerSerial: INTERMEDIATE_SERIAL,
    key: serverStatic.public,
    notBefore: now,
    notAfter: now + VALIDITY_SECONDS,
  });
  const encoded = Buffer.from(proto.CertChain.encode({ leaf, intermediate }).finish());
  return { root, serverStatic, encoded };
}
