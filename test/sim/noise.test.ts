import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Curve, makeNoiseHandler, NOISE_WA_HEADER, proto, WA_CERT_DETAILS } from 'baileys';
import pino from 'pino';
import { createCertificateChain, verifySignature } from '../../sim/noise/certificates.ts';
import { encodeFrame, FrameReader } from '../../sim/noise/framing.ts';
import { NoiseResponder } from '../../sim/noise/handshake.ts';

describe('simulator framing', () => {
  it('reads the WA intro, then 3-byte length frames split and joined across messages', () => {
    const reader = new FrameReader();
    const a = encodeFrame(Buffer.from('first'));
    const b = encodeFrame(Buffer.alloc(70_000, 7));
    const all = Buffer.concat([NOISE_WA_HEADER, a, b]);
    assert.deepEqual(reader.push(all.subarray(0, 2)), []);
    const frames = [
      ...reader.push(all.subarray(2, 9)),
      ...reader.push(all.subarray(9, 5000)),
      ...reader.push(all.subarray(5000)),
    ];
    assert.deepEqual(
      frames.map((f) => f.length),
      [5, 70_000],
    );
    assert.equal(frames[0]?.toString(), 'first');
  });

  it('skips an ED routing prefix before the WA header; refuses another intro', () => {
    const routing = Buffer.from('route');
    const ed = Buffer.from([0x45, 0x44, 0, 1, 0, 0, routing.length]);
    const reader = new FrameReader();
    assert.deepEqual(
      reader.push(Buffer.concat([ed, routing, NOISE_WA_HEADER, encodeFrame(Buffer.from('x'))])).map(String),
      ['x'],
    );
    assert.throws(
      () => new FrameReader().push(Buffer.from('GET / HTTP/1.1\r\n')),
      /framing: expected intro header/,
    );
  });

  it('frame length is big-endian over 3 bytes', () => {
    assert.deepEqual([...encodeFrame(Buffer.alloc(0x010203)).subarray(0, 3)], [1, 2, 3]);
  });
});

describe("simulator Noise responder against Baileys' own initiator (makeNoiseHandler)", () => {
  it('Baileys completes the handshake, both sides derive the same transport keys; the chain verifies from the root', async () => {
    const chain = createCertificateChain();
    const saved = WA_CERT_DETAILS.PUBLIC_KEY;
    WA_CERT_DETAILS.PUBLIC_KEY = Buffer.from(chain.root.public.toString('hex'), 'hex');
    try {
      const ephemeral = Curve.generateKeyPair();
      const noiseKey = Curve.generateKeyPair();
      const client = makeNoiseHandler({
        keyPair: ephemeral,
        NOISE_HEADER: NOISE_WA_HEADER,
        logger: pino({ level: 'silent' }) as never,
      });
      const responder = new NoiseResponder(chain.serverStatic, chain.encoded);
      const hello = proto.HandshakeMessage.encode({ clientHello: { ephemeral: ephemeral.public } }).finish();
      const serverHello = proto.HandshakeMessage.decode(responder.serverHello(hello));
      const keyEnc = client.processHandshake(serverHello, noiseKey);
      const payload = client.encrypt(
        proto.ClientPayload.encode({ username: 15550001111, device: 3 }).finish(),
      );
      const finish = responder.finish(
        proto.HandshakeMessage.encode({ clientFinish: { static: keyEnc, payload } }).finish(),
      );
      assert.deepEqual(finish.clientStatic, Buffer.from(noiseKey.public));
      assert.equal(String(finish.payload.username), '15550001111');
      assert.equal(finish.payload.device, 3);
      await client.finishInit();

      // client → server: Baileys' encodeFrame strips to [intro][len][ciphertext]
      const framed = client.encodeFrame(Buffer.from('ping from client'));
      const [body] = new FrameReader().push(framed);
      assert.ok(body);
      assert.equal(finish.transport.decrypt(body).toString(), 'ping from client');
      // server → client: Baileys decodes a frame into a binary node
      const { encodeBinaryNode } = await import('baileys');
      const nodes: unknown[] = [];
      await client.decodeFrame(
        encodeFrame(finish.transport.encrypt(encodeBinaryNode({ tag: 'iq', attrs: { id: '1' } }))),
        (n) => nodes.push(n),
      );
      assert.deepEqual(nodes, [{ tag: 'iq', attrs: { id: '1' }, content: undefined }]);

      // The chain itself, checked independently with libsignal's curve: root → intermediate → leaf = server key.
      const certs = proto.CertChain.decode(chain.encoded);
      const intermediate = proto.CertChain.NoiseCertificate.Details.decode(
        certs.intermediate?.details ?? new Uint8Array(),
      );
      const leaf = proto.CertChain.NoiseCertificate.Details.decode(certs.leaf?.details ?? new Uint8Array());
      assert.equal(intermediate.issuerSerial, WA_CERT_DETAILS.SERIAL);
      assert.ok(
        verifySignature(
          chain.root.public,
          certs.intermediate?.details ?? new Uint8Array(),
          certs.intermediate?.signature ?? new Uint8Array(),
        ),
      );
      assert.ok(
        verifySignature(
          intermediate.key ?? new Uint8Array(),
          certs.leaf?.details ?? new Uint8Array(),
          certs.leaf?.signature ?? new Uint8Array(),
        ),
      );
      assert.deepEqual(Buffer.from(leaf.key ?? []), chain.serverStatic.public);
      const other = createCertificateChain();
      assert.equal(
        verifySignature(
          other.root.public,
          certs.intermediate?.details ?? new Uint8Array(),
          certs.intermediate?.signature ?? new Uint8Array(),
        ),
        false,
      );
    } finally {
      WA_CERT_DETAILS.PUBLIC_KEY = saved;
    }
  });
});
