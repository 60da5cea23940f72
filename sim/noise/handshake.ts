/**
 * The responder side of Noise XX (Noise_XX_25519_AESGCM_SHA256) as Baileys 7 runs it as the initiator in
 * Utils/noise-handler.js and Socket/socket.js (validateConnection):
 *
 *   -> clientHello { ephemeral }                      (after the `WA\x06\x03` intro header)
 *   <- serverHello { ephemeral, static*, payload* }   (* AES-256-GCM under the chaining key, AD = the hash)
 *   -> clientFinish { static*, payload* }             (payload: proto.ClientPayload)
 *
 * The hash starts as the 32-byte protocol name itself, then absorbs the intro header and the client's
 * ephemeral key (the prologue); every handshake ciphertext is absorbed after use. Each DH result is mixed into
 * the key with HKDF-SHA256 (salt = chaining key, 64 bytes: new chaining key ‖ cipher key) and resets the
 * nonce counter, which is shared by encryption and decryption during the handshake (12-byte IV, counter
 * big-endian in the last 4 bytes). After the finish, HKDF over nothing splits the transport keys: the
 * client writes with the first half, so the server reads with it and writes with the second.
 */
import { createCipheriv, createDecipheriv, createHash, hkdfSync } from 'node:crypto';
import { Curve, NOISE_MODE, NOISE_WA_HEADER, proto } from 'baileys';
import { generateKeyPair, type KeyPair } from './certificates.ts';

const TAG_BYTES = 16;

/** 12-byte AES-GCM nonce carrying `counter` big-endian in its last four bytes. */
export function nonce(counter: number): Buffer {
  const iv = Buffer.alloc(12);
  iv.writeUInt32BE(counter >>> 0, 8);
  return iv;
}

/** AES-256-GCM with the 16-byte tag appended, as Baileys' aesEncryptGCM. */
export function sealGcm(key: Buffer, iv: Buffer, plaintext: Uint8Array, aad: Uint8Array): Buffer {
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad);
  return Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
}

/** Inverse of {@link sealGcm}; throws when the tag does not verify (wrong key, nonce or associated data). */
export function openGcm(key: Buffer, iv: Buffer, ciphertext: Uint8Array, aad: Uint8Array): Buffer {
  const data = Buffer.from(ciphertext);
  const decipher = createDecipheriv('aes-256-gcm', key, iv);
  decipher.setAAD(aad);
  decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
  return Buffer.concat([decipher.update(data.subarray(0, data.length - TAG_BYTES)), decipher.final()]);
}

function sha256(data: Uint8Array): Buffer {
  return createHash('sha256').update(data).digest();
}

/** HKDF-SHA256 to 64 bytes with an empty info, split into two 32-byte halves. */
function split(ikm: Uint8Array, salt: Buffer): [Buffer, Buffer] {
  const out = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.alloc(0), 64));
  return [out.subarray(0, 32), out.subarray(32)];
}

/** Per-direction transport cipher: AES-256-GCM, empty associated data, a counter per direction. */
export class TransportCipher {
  private readCounter = 0;
  private writeCounter = 0;
  constructor(
    private readonly encKey: Buffer,
    private readonly decKey: Buffer,
  ) {}
  /** Encrypts one outgoing frame body. */
  encrypt(plaintext: Uint8Array): Buffer {
    return sealGcm(this.encKey, nonce(this.writeCounter++), plaintext, Buffer.alloc(0));
  }
  /** Decrypts one incoming frame body; throws on a bad tag. */
  decrypt(ciphertext: Uint8Array): Buffer {
    return openGcm(this.decKey, nonce(this.readCounter++), ciphertext, Buffer.alloc(0));
  }
}

/** What the client revealed in its finish message. */
export interface ClientFinish {
  /** The client's static Noise key (Baileys' `creds.noiseKey.public`), 32 bytes. */
  clientStatic: Buffer;
  /** The decoded login or registration payload. */
  payload: proto.ClientPayload;
  /** The transport cipher for every later frame. */
  transport: TransportCipher;
}

/**
 * One server-side handshake. Call {@link serverHello} with the client hello's bytes, send its result, then
 * {@link finish} with the client finish's bytes. Errors thrown: protobuf decode errors, missing fields
 * (`Error('noise: …')`), GCM authentication failures.
 */
export class NoiseResponder {
  private hash: Buffer;
  private salt: Buffer;
  private key: Buffer;
  private counter = 0;
  private readonly ephemeral: KeyPair = generateKeyPair();
  private clientEphemeral: Buffer | undefined;

  constructor(
    private readonly serverStatic: KeyPair,
    private readonly certificateChain: Buffer,
  ) {
    const mode = Buffer.from(NOISE_MODE);
    this.hash = mode.length === 32 ? mode : sha256(mode);
    this.salt = this.hash;
    this.key = this.hash;
    this.authenticate(NOISE_WA_HEADER);
  }

  private authenticate(data: Uint8Array): void {
    this.hash = sha256(Buffer.concat([this.hash, data]));
  }

  private mixIntoKey(dh: Uint8Array): void {
    const [salt, key] = split(dh, this.salt);
    this.salt = salt;
    this.key = key;
    this.counter = 0;
  }

  private encrypt(plaintext: Uint8Array): Buffer {
    const out = sealGcm(this.key, nonce(this.counter++), plaintext, this.hash);
    this.authenticate(out);
    return out;
  }

  private decrypt(ciphertext: Uint8Array): Buffer {
    const out = openGcm(this.key, nonce(this.counter++), ciphertext, this.hash);
    this.authenticate(ciphertext);
    return out;
  }

  /** Answers a client hello (an encoded proto.HandshakeMessage) with the encoded server hello. */
  serverHello(clientHelloBytes: Uint8Array): Buffer {
    const hello = proto.HandshakeMessage.decode(clientHelloBytes).clientHello;
    const clientEphemeral = hello?.ephemeral;
    if (clientEphemeral?.length !== 32) throw new Error('noise: client hello without a 32-byte ephemeral');
    this.clientEphemeral = Buffer.from(clientEphemeral);
    this.authenticate(this.clientEphemeral);
    this.authenticate(this.ephemeral.public);
    this.mixIntoKey(Curve.sharedKey(this.ephemeral.private, this.clientEphemeral));
    const encStatic = this.encrypt(this.serverStatic.public);
    this.mixIntoKey(Curve.sharedKey(this.serverStatic.private, this.clientEphemeral));
    const payload = this.encrypt(this.certificateChain);
    return Buffer.from(
      proto.HandshakeMessage.encode({
        serverHello: { ephemeral: this.ephemeral.public, static: encStatic, payload },
      }).finish(),
    );
  }

  /** Reads the client finish (an encoded proto.HandshakeMessage) and derives the transport keys. */
  finish(clientFinishBytes: Uint8Array): ClientFinish {
    const finish = proto.HandshakeMessage.decode(clientFinishBytes).clientFinish;
    if (!finish?.static || !finish.payload) throw new Error('noise: client finish without static or payload');
    const clientStatic = this.decrypt(finish.static);
    this.mixIntoKey(Curve.sharedKey(this.ephemeral.private, clientStatic));
    const payload = proto.ClientPayload.decode(this.decrypt(finish.payload));
    const [clientWrite, clientRead] = split(Buffer.alloc(0), this.salt);
    return { clientStatic, payload, transport: new TransportCipher(clientRead, clientWrite) };
  }
}
