/**
 * The simulator's media layer against Baileys' own media code: media/crypto.ts decrypts what Baileys'
 * `encryptedStream` produces and Baileys' `downloadContentFromMessage` decrypts what it encrypts; the HTTPS media
 * server takes Baileys' `getWAUploadToServer` uploads (with a `media_conn` token, trusting the server's CA) and
 * refuses bad auth tokens, hashes, paths and signatures; `media_conn` is answered as Baileys reads it; and
 * `POST /control/media` validates its body.
 */
import assert from 'node:assert/strict';
import { readFile, unlink, writeFile } from 'node:fs/promises';
import { Agent as HttpsAgent } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  type BinaryNode,
  downloadContentFromMessage,
  encryptedStream,
  getBinaryNodeChild,
  getWAUploadToServer,
  type SocketConfig,
} from 'baileys';
import pino from 'pino';
import { Agent as UndiciAgent } from 'undici';
import { decryptMedia, encryptMedia, MediaCryptoError, sha256, uploadToken } from '../../sim/media/crypto.ts';
import { completeMedia, stickerPack } from '../../sim/media/receive.ts';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import { answerIq } from '../../sim/server/iq.ts';
import { type Simulator, startSimulator } from '../../sim/simulator.ts';
import { stickerExif, withExif } from '../../src/media/exif.ts';

const fixture = (name: string) => readFile(new URL(`../fixtures/media/${name}`, import.meta.url));
const silent = pino({ level: 'silent' });

async function collect(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

describe('simulator media', () => {
  let sim: Simulator;
  const upload = async (path: string, body: Buffer, method = 'POST') => {
    const response = await fetch(`https://${sim.media.host}${path}`, {
      method,
      body: method === 'POST' ? body : null,
      dispatcher: new UndiciAgent({ connect: { ca: sim.mediaCa } }),
    } as unknown as RequestInit);
    const text = Buffer.from(await response.arrayBuffer());
    return { status: response.status, text, json: () => JSON.parse(text.toString('utf8')) };
  };

  before(async () => {
    sim = await startSimulator();
  });
  after(() => sim.close());

  it('decrypts what Baileys encrypts (every media type), and Baileys decrypts what it encrypts', async () => {
    const plain = await fixture('tiny.jpg');
    for (const type of ['image', 'video', 'audio', 'document', 'sticker'] as const) {
      const enc = await encryptedStream(plain, type);
      try {
        const file = await readFile(enc.encFilePath);
        const out = decryptMedia(file, type, {
          mediaKey: enc.mediaKey,
          fileSha256: enc.fileSha256,
          fileEncSha256: enc.fileEncSha256,
          fileLength: enc.fileLength,
        });
        assert.deepEqual(out, plain, type);
      } finally {
        await unlink(enc.encFilePath);
      }
      const ours = encryptMedia(plain, type);
      const stored = sim.media.put(type === 'sticker' ? 'image' : type, ours.file);
      const stream = await downloadContentFromMessage(
        { mediaKey: ours.mediaKey, directPath: stored.directPath, url: stored.url },
        type,
        {
          options: {
            dispatcher: new UndiciAgent({ connect: { ca: sim.mediaCa } }),
          } as unknown as RequestInit,
        },
      );
      assert.deepEqual(await collect(stream), plain, `Baileys decrypts our ${type}`);
    }
  });

  it('refuses a file whose hash, MAC, plaintext hash or length does not match, naming the check', () => {
    const plain = Buffer.from('a document body');
    const good = encryptMedia(plain, 'document');
    const fields = {
      mediaKey: good.mediaKey,
      fileSha256: good.fileSha256,
      fileEncSha256: good.fileEncSha256,
      fileLength: good.fileLength,
    };
    const tampered = Buffer.from(good.file);
    tampered[0] = (tampered[0] ?? 0) ^ 1;
    assert.throws(() => decryptMedia(tampered, 'document', fields), {
      name: 'MediaCryptoError',
      message: 'fileEncSha256 does not match the downloaded file',
    });
    assert.throws(() => decryptMedia(tampered, 'document', { ...fields, fileEncSha256: null }), {
      message: 'MAC does not match the media key',
    });
    assert.throws(() => decryptMedia(good.file, 'image', { ...fields, fileEncSha256: null }), {
      message: 'MAC does not match the media key',
    });
    assert.throws(
      () => decryptMedia(good.file, 'document', { ...fields, fileSha256: sha256(Buffer.from('x')) }),
      {
        message: 'fileSha256 does not match the decrypted bytes',
      },
    );
    assert.throws(() => decryptMedia(good.file, 'document', { ...fields, fileLength: 3 }), {
      message: `fileLength says 3 bytes, decrypted ${plain.length}`,
    });
    assert.throws(() => encryptMedia(plain, 'image', Buffer.alloc(31)), MediaCryptoError);
  });

  it('media_conn hands out a token and the host; Baileys uploads with it and gets a direct path that serves the file', async () => {
    const answer = answerIq(
      {
        tag: 'iq',
        attrs: { id: '1', type: 'set', xmlns: 'w:m' },
        content: [{ tag: 'media_conn', attrs: {} }],
      },
      // Only `media` is read for this iq.
      { media: sim.media } as unknown as Parameters<typeof answerIq>[1],
    );
    assert.ok('content' in answer && answer.content);
    const node = getBinaryNodeChild(
      { tag: 'iq', attrs: {}, content: answer.content } as BinaryNode,
      'media_conn',
    );
    assert.ok(node?.attrs.auth);
    assert.equal(node.attrs.ttl, '3600');
    const host = getBinaryNodeChild(node, 'host');
    assert.deepEqual(host?.attrs, {
      hostname: sim.media.host,
      maxContentLengthBytes: String(110 * 1024 * 1024),
    });

    const refresh = async () => ({
      hosts: [{ hostname: sim.media.host, maxContentLengthBytes: 1 }],
      auth: node.attrs.auth ?? '',
      ttl: 3600,
      fetchDate: new Date(),
    });
    const encrypted = encryptMedia(await fixture('doc.pdf'), 'document');
    const file = join(tmpdir(), `sim-media-${process.pid}.enc`);
    await writeFile(file, encrypted.file);
    try {
      const config = { customUploadHosts: [], logger: silent, options: {} } as unknown as SocketConfig;
      const trusted = getWAUploadToServer(
        { ...config, fetchAgent: new HttpsAgent({ ca: sim.mediaCa }) } as SocketConfig,
        refresh,
      );
      const result = await trusted(file, {
        mediaType: 'document',
        fileEncSha256B64: encrypted.fileEncSha256.toString('base64'),
      });
      assert.match(
        result.directPath,
        /^\/v\/t62\.7118-24\/[0-9]+_[0-9]+_n\.enc\?ccb=11-4&oh=01_[\w-]+&oe=[0-9A-F]+&_nc_sid=5e03e0$/,
      );
      assert.equal(result.mediaUrl, `https://${sim.media.host}${result.directPath}&mms3=true`);
      assert.deepEqual(await sim.media.download(result.directPath), encrypted.file);
      assert.equal(sim.media.get(result.directPath)?.kind, 'document');

      const untrusted = getWAUploadToServer(config, refresh);
      await assert.rejects(
        untrusted(file, {
          mediaType: 'document',
          fileEncSha256B64: encrypted.fileEncSha256.toString('base64'),
        }),
        { message: 'Media upload failed on all hosts' },
      );
    } finally {
      await unlink(file);
    }
  });

  it('refuses uploads with an unknown token, a wrong hash or path, and downloads of unknown or forged paths', async () => {
    const auth = encodeURIComponent(sim.media.mediaConn().auth);
    const body = encryptMedia(Buffer.from('hello'), 'image').file;
    const hash = uploadToken(sha256(body));
    const before = sim.media.count();

    const badAuth = await upload(`/mms/image/${hash}?auth=nope&token=${hash}`, body);
    assert.deepEqual(
      [badAuth.status, badAuth.json()],
      [401, { error: 'auth: not a token this server handed out (media_conn)' }],
    );
    const other = uploadToken(sha256(Buffer.from('other')));
    const wrongHash = await upload(`/mms/image/${other}?auth=${auth}&token=${other}`, body);
    assert.deepEqual(
      [wrongHash.status, wrongHash.json()],
      [400, { error: 'body: SHA-256 of the upload does not match the hash in the path' }],
    );
    const wrongToken = await upload(`/mms/image/${hash}?auth=${auth}&token=${other}`, body);
    assert.deepEqual(
      [wrongToken.status, wrongToken.json()],
      [400, { error: 'token: must equal the hash in the path' }],
    );
    const badKind = await upload(`/mms/gif/${hash}?auth=${auth}&token=${hash}`, body);
    assert.equal(badKind.status, 404);
    assert.equal(sim.media.count(), before, 'nothing stored');

    const ok = await upload(`/mms/image/${hash}?auth=${auth}&token=${hash}`, body);
    assert.equal(ok.status, 200);
    const { url, direct_path: directPath } = ok.json() as { url: string; direct_path: string };
    assert.equal(url, `https://${sim.media.host}${directPath}&mms3=true`);
    const got = await upload(directPath, Buffer.alloc(0), 'GET');
    assert.deepEqual([got.status, got.text], [200, body]);

    const unknown = await upload(
      '/v/t62.7118-24/1_2_n.enc?ccb=11-4&oh=01_x&oe=FFFFFFFF',
      Buffer.alloc(0),
      'GET',
    );
    assert.deepEqual(
      [unknown.status, unknown.json()],
      [404, { error: 'no media at /v/t62.7118-24/1_2_n.enc' }],
    );
    const forged = await upload(directPath.replace(/oh=01_[\w-]+/, 'oh=01_forged'), Buffer.alloc(0), 'GET');
    assert.deepEqual([forged.status, forged.json()], [403, { error: 'oh: URL signature does not match' }]);
    const extended = await upload(directPath.replace(/oe=[0-9A-F]+/, 'oe=FFFFFFFF'), Buffer.alloc(0), 'GET');
    assert.equal(extended.status, 403, 'the expiry is signed too');
  });

  it('a received media message that does not verify gets media.error naming the check, and no media event', async () => {
    const plain = Buffer.from('photo bytes');
    const good = encryptMedia(plain, 'image');
    const stored = sim.media.put('image', good.file);
    const events: unknown[] = [];
    sim.context.events.on('media', (event) => events.push(event));
    const base = { id: 'X', from: '1', fromDevice: 1, timestamp: '', type: 'image' };
    const part = {
      directPath: stored.directPath,
      mediaKey: good.mediaKey,
      fileSha256: good.fileSha256,
      fileEncSha256: good.fileEncSha256,
      fileLength: good.fileLength,
    };
    const cases: [Record<string, unknown>, InboxEntry['media']][] = [
      [part, { sha256: sha256(plain).toString('hex'), length: plain.length }],
      [
        { ...part, fileEncSha256: sha256(Buffer.from('x')) },
        { error: 'fileEncSha256 does not match the downloaded file' },
      ],
      [
        { ...part, mediaKey: Buffer.alloc(32, 1), fileEncSha256: null },
        { error: 'MAC does not match the media key' },
      ],
      [{ ...part, directPath: null }, { error: 'the message has neither directPath nor url' }],
      [
        { ...part, directPath: stored.directPath.replace(/oh=01_[\w-]+/, 'oh=01_x') },
        { error: 'media download answered 403: {"error":"oh: URL signature does not match"}' },
      ],
    ];
    for (const [imageMessage, media] of cases) {
      const entry: InboxEntry = { ...base };
      await completeMedia(entry, { imageMessage }, sim.context);
      assert.deepEqual(entry.media, media);
    }
    assert.equal(events.length, 1, 'only the good one was published');
  });

  it('reads the sticker pack a WEBP carries in its EXIF; none without EXIF', async () => {
    const webp = await fixture('tiny.webp');
    assert.equal(await stickerPack(webp), undefined);
    const tagged = await withExif(
      webp,
      stickerExif({ packId: 'p.1', packName: 'Pack', packPublisher: 'Me', emojis: ['😀'] }),
    );
    assert.deepEqual(await stickerPack(tagged), {
      packId: 'p.1',
      packName: 'Pack',
      packPublisher: 'Me',
      emojis: ['😀'],
    });
  });

  it('POST /control/media validates kind-specific fields, users and linked devices', async () => {
    const post = async (body: unknown) => {
      const response = await fetch(`${sim.control}/media`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: response.status, body: await response.json() };
    };
    for (const phone of ['15550001111', '15550002222']) {
      await fetch(`${sim.control}/users`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ phone }),
      });
    }
    const base = { from: '15550001111', to: '15550002222', data: Buffer.from('x').toString('base64') };
    assert.deepEqual(await post({ ...base, kind: 'gif' }), {
      status: 400,
      body: { error: { code: 400, message: 'kind: must be equal to one of the allowed values' } },
    });
    assert.deepEqual(await post({ ...base, kind: 'audio', caption: 'hi' }), {
      status: 400,
      body: { error: { code: 400, message: 'caption: not allowed for kind "audio"' } },
    });
    assert.deepEqual(await post({ ...base, kind: 'image', fileName: 'a.jpg' }), {
      status: 400,
      body: { error: { code: 400, message: 'fileName: only allowed for kind "document"' } },
    });
    assert.deepEqual(await post({ ...base, kind: 'image', ptt: true }), {
      status: 400,
      body: { error: { code: 400, message: 'ptt: only allowed for kind "audio"' } },
    });
    assert.deepEqual(await post({ ...base, kind: 'image', data: 'not base64!' }), {
      status: 400,
      body: { error: { code: 400, message: 'data: must match pattern "^[A-Za-z0-9+/]+={0,2}$"' } },
    });
    assert.deepEqual(await post({ ...base, kind: 'image', from: '15550009999' }), {
      status: 404,
      body: { error: { code: 404, message: 'from: no simulated user with phone 15550009999' } },
    });
    assert.deepEqual(await post({ ...base, kind: 'image' }), {
      status: 409,
      body: { error: { code: 409, message: 'to: account 15550002222 has no linked device' } },
    });
  });
});
