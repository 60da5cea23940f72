/**
 * The live engine's media download (src/engines/baileys/media-download.ts) against the simulator's HTTPS media
 * server: the reference taken from a platform message, the file decrypted byte for byte through the upload
 * agent that trusts the server's CA, and each failure named: an unknown or expired link (410 gone), a file that
 * fails its MAC or hashes (502), a file over the limit (413), an untrusted certificate (503).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { proto } from 'baileys';
import pino from 'pino';
import { encryptMedia } from '../../sim/media/crypto.ts';
import { type MediaServer, startMediaServer } from '../../sim/media/server.ts';
import { createMediaTls } from '../../sim/media/tls.ts';
import { DomainError } from '../../src/domain/errors.ts';
import { downloadPlatformMedia, mediaReferenceOf } from '../../src/engines/baileys/media-download.ts';
import { mediaUploadAgent } from '../../src/engines/baileys/platform.ts';
import { fixture } from '../messages/support.ts';

async function collect(source: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of source) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** Rejects with a DomainError of `code` whose message matches `message`. */
async function refused(promise: Promise<unknown>, code: string, message: RegExp | string): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof DomainError, String(error));
    assert.equal(error.code, code);
    if (typeof message === 'string') assert.equal(error.message, message);
    else assert.match(error.message, message);
    return true;
  });
}

describe('live engine media download from a media server', () => {
  let server: MediaServer;
  let agent: ReturnType<typeof mediaUploadAgent>;
  const pdf = fixture('doc.pdf');

  /** A document message as a phone sends it, its file stored on the media server; `edit` alters the fields. */
  const documentMessage = (edit: Partial<proto.Message.IDocumentMessage> = {}): proto.IMessage => {
    const encrypted = encryptMedia(pdf, 'document');
    const stored = server.put('document', encrypted.file);
    return {
      documentWithCaptionMessage: {
        message: {
          documentMessage: {
            url: stored.url,
            directPath: stored.directPath,
            mediaKey: encrypted.mediaKey,
            fileSha256: encrypted.fileSha256,
            fileEncSha256: encrypted.fileEncSha256,
            fileLength: encrypted.fileLength,
            mimetype: 'application/pdf',
            fileName: 'order.pdf',
            ...edit,
          },
        },
      },
    };
  };
  const referenceOf = (message: proto.IMessage) => {
    const reference = mediaReferenceOf(message);
    assert.ok(reference);
    return reference;
  };

  before(async () => {
    const tls = await createMediaTls();
    server = await startMediaServer({ tls, log: pino({ level: 'silent' }) });
    agent = mediaUploadAgent(server.ca);
  });
  after(() => server.close());

  it('takes the reference from the (wrapped) message and decrypts the file byte for byte', async () => {
    const message = documentMessage();
    const reference = JSON.parse(referenceOf(message));
    assert.equal(reference.type, 'document');
    assert.match(reference.directPath, /^\/v\/t62\.7118-24\//);
    const bytes = await collect(await downloadPlatformMedia(referenceOf(message), 'M1', 1024 * 1024, agent));
    assert.ok(bytes.equals(pdf));
  });

  it('no reference for a message without media or without a media key', () => {
    assert.equal(mediaReferenceOf({ conversation: 'hi' }), undefined);
    assert.equal(
      mediaReferenceOf(
        proto.Message.fromObject({ imageMessage: { directPath: '/v/x', mimetype: 'image/jpeg' } }),
      ),
      undefined,
    );
  });

  it('an unknown or expired link is 410 gone, named', async () => {
    const reference = JSON.parse(referenceOf(documentMessage()));
    reference.directPath = '/v/t62.7118-24/0_0_n.enc?ccb=11-4&oh=01_x&oe=0';
    await refused(
      downloadPlatformMedia(JSON.stringify(reference), 'M2', 1024 * 1024, agent),
      'gone',
      'the platform no longer has the media of message M2: its media links expire after a while (the host answered HTTP 404), and parley had not kept a copy',
    );
  });

  it('a file that fails its MAC or its hashes is refused (502)', async () => {
    const wrongKey = referenceOf(documentMessage({ mediaKey: Buffer.alloc(32, 7) }));
    await refused(
      collect(await downloadPlatformMedia(wrongKey, 'M3', 1024 * 1024, agent)),
      'platform_refused',
      'the media of message M3 failed its check: MAC mismatch',
    );
    const wrongHash = referenceOf(documentMessage({ fileSha256: Buffer.alloc(32, 1) }));
    await refused(
      collect(await downloadPlatformMedia(wrongHash, 'M4', 1024 * 1024, agent)),
      'platform_refused',
      'the media of message M4 failed its check: SHA-256 of the file mismatch',
    );
  });

  it('a file over the limit is refused (413) before it is read', async () => {
    await refused(
      downloadPlatformMedia(referenceOf(documentMessage()), 'M5', 100, agent),
      'too_large',
      'media of message M5 is larger than 100 bytes',
    );
  });

  it("without the media server's CA the TLS check refuses the host (503)", async () => {
    await refused(
      downloadPlatformMedia(referenceOf(documentMessage()), 'M6', 1024 * 1024, undefined),
      'platform_unreachable',
      /^the platform's media host could not be reached: /,
    );
  });
});
