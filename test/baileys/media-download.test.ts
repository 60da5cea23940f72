/**
 * The live engine's media download (src/engines/baileys/media-download.ts) against the simulator's HTTPS media
 * server: the reference taken from a platform message, the file decrypted byte for byte through the upload
 * agent that trusts the server's CA, and each failure named: an unknown or expired link (410 gone), a file that
 * fails its MAC or hashes (502), a file over the limit (413), an untrusted certificate (503). Links off the
 * platform's media hosts (or the trusted simulator's) are never fetched, and a re-upload answer cannot move the
 * file to another host (docs/decisions/0046-media-re-upload.md).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { proto } from 'baileys';
import pino from 'pino';
import { encryptMedia } from '../../sim/media/crypto.ts';
import { type MediaServer, startMediaServer } from '../../sim/media/server.ts';
import { createMediaTls } from '../../sim/media/tls.ts';
import { DomainError } from '../../src/domain/errors.ts';
import {
  downloadPlatformMedia,
  isPlatformMediaUrl,
  mediaReferenceOf,
  movedMediaReference,
  parseMediaReference,
  trustSimulatorMediaHost,
} from '../../src/engines/baileys/media-download.ts';
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

/** A document on `server` as a phone sends it: the message and its stored reference. */
function storedDocument(server: MediaServer, bytes: Buffer): proto.IMessage {
  const encrypted = encryptMedia(bytes, 'document');
  const stored = server.put('document', encrypted.file);
  return {
    documentMessage: {
      url: stored.url,
      directPath: stored.directPath,
      mediaKey: encrypted.mediaKey,
      fileSha256: encrypted.fileSha256,
      fileEncSha256: encrypted.fileEncSha256,
      fileLength: encrypted.fileLength,
      mimetype: 'application/pdf',
    },
  };
}

// Runs first, before any simulator host is trusted in this process.
describe('media links off the platform media hosts are not fetched', () => {
  let server: MediaServer;
  let agent: ReturnType<typeof mediaUploadAgent>;
  before(async () => {
    server = await startMediaServer({ tls: await createMediaTls(), log: pino({ level: 'silent' }) });
    agent = mediaUploadAgent(server.ca);
  });
  after(() => server.close());

  it('a received link to an untrusted host (127.0.0.1) is refused (404) without a request', async () => {
    const reference = mediaReferenceOf(storedDocument(server, fixture('doc.pdf')));
    assert.ok(reference);
    await refused(
      downloadPlatformMedia(reference, 'S1', 1024 * 1024, agent),
      'not_found',
      `message S1 has no downloadable media: its link is not on the platform's media hosts (127.0.0.1:${server.port})`,
    );
  });

  it('a direct path that names another host through "@" is refused, though the URL is on whatsapp.net', async () => {
    const reference = parseMediaReference(mediaReferenceOf(storedDocument(server, fixture('doc.pdf'))) ?? '');
    assert.ok(reference?.directPath);
    const forged = JSON.stringify({
      ...reference,
      url: 'https://mmg.whatsapp.net/v/t62.7118-24/1_2_n.enc?ccb=11-4&mms3=true',
      directPath: `@127.0.0.1:${server.port}${reference.directPath}`,
    });
    await refused(
      downloadPlatformMedia(forged, 'S2', 1024 * 1024, agent),
      'not_found',
      'message S2 has no downloadable media: its direct path is not a plain path',
    );
  });

  it('the platform media hosts: whatsapp.net hosts over HTTPS on the default port', () => {
    const yes = [
      'https://mmg.whatsapp.net/v/x',
      'https://media-gru1-1.cdn.whatsapp.net/v/x',
      'https://MMG.WhatsApp.net:443/v',
    ];
    for (const url of yes) assert.equal(isPlatformMediaUrl(new URL(url)), true, url);
    const no = [
      'http://mmg.whatsapp.net/v/x',
      'https://mmg.whatsapp.net:8443/v/x',
      'https://mmg.whatsapp.net.evil.example/v/x',
      'https://evilwhatsapp.net/v/x',
      'https://mmg.whatsapp.net@127.0.0.1/v/x',
      'https://127.0.0.1/v/x',
      'https://[::1]/v/x',
    ];
    for (const url of no) assert.equal(isPlatformMediaUrl(new URL(url)), false, url);
  });
});

describe('a re-upload answer stays on the media host', () => {
  const original = {
    type: 'image' as const,
    mediaKey: Buffer.alloc(32, 1).toString('base64'),
    directPath: '/v/t62.7118-24/1_2_n.enc?ccb=11-4&oh=01_a&oe=6B1ADA61',
    url: 'https://mmg.whatsapp.net/v/t62.7118-24/1_2_n.enc?ccb=11-4&oh=01_a&oe=6B1ADA61&mms3=true',
  };
  const moved = '/v/t62.7118-24/3_4_n.enc?ccb=11-4&oh=01_b&oe=6B1ADA62&_nc_sid=5e03e0';

  it('a plain path: the reference moves on the same host', () => {
    assert.deepEqual(JSON.parse(movedMediaReference(original, moved, 'R1')), {
      ...original,
      directPath: moved,
      url: `https://mmg.whatsapp.net${moved}`,
    });
    const withoutUrl = { type: original.type, mediaKey: original.mediaKey, directPath: original.directPath };
    assert.equal(
      JSON.parse(movedMediaReference(withoutUrl, moved, 'R1')).url,
      `https://mmg.whatsapp.net${moved}`,
      "Baileys' default host",
    );
  });

  for (const [forged, why] of [
    ['@127.0.0.1:8443/x', 'is not a plain path'],
    ['.evil.example/x', 'is not a plain path'],
    ['//evil.example/x', 'is not a plain path'],
    [':8443/x', 'is not a plain path'],
    ['/x#@evil', 'is not a plain path'],
    ['/x\\@evil/y', 'is not a plain path'],
  ] as const) {
    it(`${JSON.stringify(forged)}: refused as a failed re-upload (410)`, () => {
      assert.throws(
        () => movedMediaReference(original, forged, 'R2'),
        (error: unknown) => {
          assert.ok(error instanceof DomainError);
          assert.equal(error.code, 'gone');
          assert.equal(
            error.message,
            `the platform no longer has the media of message R2 (its media links expire after a while), parley had not kept a copy, and the sender's phone could not upload it again: its answer named a direct path that ${why} (${JSON.stringify(forged)})`,
          );
          return true;
        },
      );
    });
  }

  it('a reference whose own host is not a platform media host cannot move', () => {
    const untrusted = { ...original, url: 'https://10.0.0.5/v/x' };
    assert.throws(() => movedMediaReference(untrusted, moved, 'R3'), {
      code: 'gone',
      message: /its answer named a direct path that is on 10\.0\.0\.5, not a platform media host \(/,
    });
  });
});

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
    // As the engine does with PLATFORM_URL: the simulator's media server is on the host of its WebSocket.
    trustSimulatorMediaHost('ws://127.0.0.1:1/');
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
