/**
 * Received media on the sandbox through the HTTP API: a simulated user sends a file (POST
 * /v1/sandbox/inbound/media), the Message webhook carries its metadata and `media.url`, and GET
 * /v1/messages/{id}/media returns the same bytes with headers from the bytes; unknown messages, messages without
 * media and files parley sent itself are 404s; the size limit answers 413; the local store keeps a file for the
 * retention (pruned with a manual clock) and the simulated platform's link expires, after which the sender's
 * phone uploads the file again (docs/decisions/0046-media-re-upload.md; 409 while not connected). Only bytes of a
 * safe image, video or audio type are served inline; anything else (XML, SVG, HTML sent as an "image") is an
 * attachment, and every file is served under a sandboxing CSP (docs/decisions/0017-messages-and-media.md). SQLite and
 * PostgreSQL.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { SANDBOX_MEDIA_TTL_MS } from '../../src/engines/sandbox/media.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { appFor, bad, dataUri, fixture, OWN, PEER } from './support.ts';

const PUBLIC = 'https://parley.example.com';
const DAY = 86_400_000;

/** The stored webhook payload of the Message event of message `id`. */
async function messageEvent(t: TestApp, id: string) {
  const rows = await t.services.store.db
    .selectFrom('webhook_events')
    .select(['payload'])
    .where('instance_id', '=', t.instance.id)
    .where('type', '=', 'Message')
    .execute();
  const found = rows.map((r) => JSON.parse(r.payload)).find((p) => p.event.info.id === id);
  assert.ok(found, `the Message event of ${id}`);
  return found.event;
}

/** GET the file of message `id` (raw bytes and headers). */
async function download(t: TestApp, id: string, key = t.key) {
  const res = await t.app.inject({
    method: 'GET',
    url: `/v1/messages/${id}/media?from=${t.instance.id}`,
    headers: { authorization: `Bearer ${key}` },
  });
  return {
    status: res.statusCode,
    headers: res.headers,
    bytes: res.rawPayload,
    json: () => JSON.parse(res.body),
  };
}

for (const dialect of testDialects()) {
  describe(`received media: sandbox inbound media and GET /v1/messages/{id}/media [${dialect}]`, () => {
    let t: TestApp;
    const inbound = async (body: Record<string, unknown>) => {
      const res = await t.call('POST', '/v1/sandbox/inbound/media', { phone: PEER, ...body });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body.data.id as string;
    };
    before(async () => {
      t = await appFor(dialect, { env: { PUBLIC_URL: PUBLIC, MEDIA_MAX_MB: '1' } });
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    const cases = [
      {
        name: 'image',
        request: { kind: 'image', media: dataUri(fixture('tiny.jpg'), 'image/jpeg'), caption: 'Broken part' },
        bytes: fixture('tiny.jpg'),
        type: 'image/jpeg',
        disposition: (id: string) => `inline; filename="${id}.jpg"; filename*=UTF-8''${id}.jpg`,
        message: {
          conversation: 'Broken part',
          imageMessage: {
            mimetype: 'image/jpeg',
            fileLength: fixture('tiny.jpg').length,
            caption: 'Broken part',
          },
        },
        media: {
          kind: 'image',
          mimetype: 'image/jpeg',
          size: fixture('tiny.jpg').length,
          caption: 'Broken part',
        },
      },
      {
        name: 'voice note',
        request: { kind: 'audio', media: dataUri(fixture('voice.ogg'), 'audio/ogg; codecs=opus'), ptt: true },
        bytes: fixture('voice.ogg'),
        type: 'audio/ogg; codecs=opus',
        disposition: (id: string) => `inline; filename="${id}.opus"; filename*=UTF-8''${id}.opus`,
        message: {
          conversation: '',
          audioMessage: {
            mimetype: 'audio/ogg; codecs=opus',
            fileLength: fixture('voice.ogg').length,
            ptt: true,
          },
        },
        media: { kind: 'audio', mimetype: 'audio/ogg; codecs=opus', size: fixture('voice.ogg').length },
      },
      {
        name: 'audio file',
        request: { kind: 'audio', media: dataUri(fixture('tone.mp3'), 'audio/mpeg') },
        bytes: fixture('tone.mp3'),
        type: 'audio/mpeg',
        disposition: (id: string) => `inline; filename="${id}.mp3"; filename*=UTF-8''${id}.mp3`,
        message: {
          conversation: '',
          audioMessage: { mimetype: 'audio/mpeg', fileLength: fixture('tone.mp3').length, ptt: false },
        },
        media: { kind: 'audio', mimetype: 'audio/mpeg', size: fixture('tone.mp3').length },
      },
      {
        name: 'document',
        request: {
          kind: 'document',
          media: dataUri(fixture('doc.pdf'), 'application/pdf'),
          fileName: 'pedido nº 42.pdf',
          caption: 'My order',
        },
        bytes: fixture('doc.pdf'),
        type: 'application/pdf',
        disposition: () =>
          `attachment; filename="pedido n_ 42.pdf"; filename*=UTF-8''pedido%20n%C2%BA%2042.pdf`,
        message: {
          conversation: 'My order',
          documentMessage: {
            mimetype: 'application/pdf',
            fileLength: fixture('doc.pdf').length,
            caption: 'My order',
            fileName: 'pedido nº 42.pdf',
          },
        },
        media: {
          kind: 'document',
          mimetype: 'application/pdf',
          size: fixture('doc.pdf').length,
          caption: 'My order',
          fileName: 'pedido nº 42.pdf',
        },
      },
      {
        name: 'video',
        request: { kind: 'video', media: dataUri(fixture('clip.mp4'), 'video/mp4'), caption: 'Unboxing' },
        bytes: fixture('clip.mp4'),
        type: 'video/mp4',
        disposition: (id: string) => `inline; filename="${id}.mp4"; filename*=UTF-8''${id}.mp4`,
        message: {
          conversation: 'Unboxing',
          videoMessage: {
            mimetype: 'video/mp4',
            fileLength: fixture('clip.mp4').length,
            caption: 'Unboxing',
          },
        },
        media: {
          kind: 'video',
          mimetype: 'video/mp4',
          size: fixture('clip.mp4').length,
          caption: 'Unboxing',
        },
      },
      {
        name: 'sticker (no declared type: the kind default)',
        request: { kind: 'sticker', media: `data:;base64,${fixture('tiny.webp').toString('base64')}` },
        bytes: fixture('tiny.webp'),
        type: 'image/webp',
        disposition: (id: string) => `inline; filename="${id}.webp"; filename*=UTF-8''${id}.webp`,
        message: {
          conversation: '',
          stickerMessage: { mimetype: 'image/webp', fileLength: fixture('tiny.webp').length },
        },
        media: { kind: 'sticker', mimetype: 'image/webp', size: fixture('tiny.webp').length },
      },
    ];

    for (const c of cases) {
      it(`${c.name}: the webhook carries its metadata and media.url; GET returns the same bytes`, async () => {
        const id = await inbound(c.request);
        const event = await messageEvent(t, id);
        assert.deepEqual(event.message, c.message);
        assert.deepEqual(event.media, {
          ...c.media,
          url: `${PUBLIC}/v1/messages/${id}/media?from=${t.instance.id}`,
        });
        for (const round of ['fetched from the platform', 'served from the local store']) {
          const res = await download(t, id);
          assert.equal(res.status, 200, `${round}: ${res.bytes.toString()}`);
          assert.ok(res.bytes.equals(c.bytes), `${round}: the same bytes`);
          assert.equal(res.headers['content-type'], c.type, round);
          assert.equal(res.headers['content-length'], String(c.bytes.length), round);
          assert.equal(res.headers['content-disposition'], c.disposition(id), round);
          assert.equal(res.headers['x-content-type-options'], 'nosniff');
          assert.equal(res.headers['content-security-policy'], "default-src 'none'; sandbox");
        }
      });
    }

    it('an image, sticker, video or audio whose bytes are XML, SVG or HTML comes as an attachment, sandboxed', async () => {
      // Any contact can send such a file as an "image"; served inline from parley's origin, its scripts would run.
      const xml = Buffer.from(
        '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><script>alert(1)</script></html>',
      );
      const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>');
      const html = Buffer.from('<!doctype html><html><script>alert(1)</script></html>');
      for (const [kind, bytes] of [
        ['image', xml],
        ['sticker', svg],
        ['video', html],
        ['audio', xml],
      ] as const) {
        const id = await inbound({ kind, media: dataUri(bytes, 'image/jpeg') });
        const res = await download(t, id);
        assert.equal(res.status, 200, res.bytes.toString());
        const disposition = String(res.headers['content-disposition']);
        assert.ok(
          disposition.startsWith('attachment;'),
          `${kind}: ${res.headers['content-type']} ${disposition}`,
        );
        assert.equal(res.headers['content-security-policy'], "default-src 'none'; sandbox", kind);
        assert.equal(res.headers['x-content-type-options'], 'nosniff', kind);
      }
    });

    it('Content-Type comes from the bytes, not from the declared type', async () => {
      const id = await inbound({ kind: 'image', media: dataUri(fixture('tiny.png'), 'image/jpeg') });
      assert.equal((await messageEvent(t, id)).media.mimetype, 'image/jpeg');
      const res = await download(t, id);
      assert.equal(res.headers['content-type'], 'image/png');
      const text = await inbound({
        kind: 'document',
        media: dataUri(Buffer.from('plain words'), 'text/plain'),
      });
      const doc = await download(t, text);
      assert.equal(doc.headers['content-type'], 'application/octet-stream');
      assert.equal(doc.bytes.toString(), 'plain words');
      assert.equal(doc.headers['content-disposition'], `attachment; filename="file"; filename*=UTF-8''file`);
    });

    it('a document whose file name holds a lone surrogate is served under U+FFFD in its place', async () => {
      // The platform's protobuf decoding turns invalid UTF-8 (ED A0 80) into a lone \ud800.
      const id = await inbound({
        kind: 'document',
        media: dataUri(fixture('doc.pdf')),
        fileName: 'inv\ud800.pdf',
      });
      const res = await download(t, id);
      assert.equal(res.status, 200, res.bytes.toString());
      assert.ok(res.bytes.equals(fixture('doc.pdf')));
      assert.equal(
        res.headers['content-disposition'],
        `attachment; filename="inv_.pdf"; filename*=UTF-8''inv%EF%BF%BD.pdf`,
      );
    });

    it("a media message whose id holds a lone surrogate is recorded, its media.url with U+FFFD in the id's place", async () => {
      // A history sync's ids are decoded from a protobuf, so invalid UTF-8 there is a lone surrogate too.
      const id = '3A00\ud800SURROGATE';
      await t.services.recorder.record(t.instance.id, {
        type: 'message',
        message: {
          id,
          source: {
            chat: `${PEER}@s.whatsapp.net`,
            sender: `${PEER}@s.whatsapp.net`,
            isFromMe: false,
            isGroup: false,
          },
          pushName: 'Peer',
          timestamp: Date.now(),
          content: { kind: 'image', mimetype: 'image/png', fileLength: 10, download: 'ref' },
        },
      });
      const rows = await t.services.store.db
        .selectFrom('webhook_events')
        .select(['payload'])
        .where('instance_id', '=', t.instance.id)
        .where('type', '=', 'Message')
        .execute();
      const urls = rows
        .map((r) => JSON.parse(r.payload).event.media?.url)
        .filter((u) => u?.includes('SURROGATE'));
      assert.deepEqual(urls, [`${PUBLIC}/v1/messages/3A00%EF%BF%BDSURROGATE/media?from=${t.instance.id}`]);
    });

    it('concurrent first requests share one download and get the same bytes', async () => {
      const id = await inbound({ kind: 'video', media: dataUri(fixture('clip.3gp'), 'video/3gpp') });
      const results = await Promise.all([download(t, id), download(t, id), download(t, id)]);
      for (const res of results) {
        assert.equal(res.status, 200);
        assert.ok(res.bytes.equals(fixture('clip.3gp')));
        assert.equal(res.headers['content-type'], 'video/3gpp');
      }
    });

    it('in a group: the member sends a file, and it downloads the same', async () => {
      const group = await t.call('POST', '/v1/sandbox/groups', {
        name: 'Shop team',
        ownerPhone: PEER,
        participants: [],
      });
      assert.equal(group.status, 200, JSON.stringify(group.body));
      const id = await inbound({
        kind: 'image',
        media: dataUri(fixture('tiny.gif')),
        groupJid: group.body.data.jid,
      });
      const event = await messageEvent(t, id);
      assert.equal(event.info.messageSource.isGroup, true);
      assert.equal(event.media.mimetype, 'application/octet-stream', 'as declared by the sender');
      const res = await download(t, id);
      assert.equal(res.headers['content-type'], 'image/gif', 'from the bytes');
      assert.ok(res.bytes.equals(fixture('tiny.gif')));
    });

    it('404 for an unknown message, a message without media, and a file parley sent itself', async () => {
      assert.deepEqual(
        (await download(t, '3A00000000000000DEAD')).json(),
        bad(404, 'message 3A00000000000000DEAD not found'),
      );
      const text = await t.call('POST', '/v1/sandbox/inbound', { phone: PEER, body: 'hi' });
      assert.deepEqual(
        (await download(t, text.body.data.id)).json(),
        bad(404, `message ${text.body.data.id} has no media (it is a text message)`),
      );
      const sent = await t.call('POST', '/v1/messages/send/image', {
        phone: PEER,
        image: dataUri(fixture('tiny.png'), 'image/png'),
      });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      assert.equal((await messageEvent(t, sent.body.data.id)).media, undefined, 'no media link on own sends');
      assert.deepEqual(
        (await download(t, sent.body.data.id)).json(),
        bad(
          404,
          `the media of message ${sent.body.data.id} cannot be downloaded: parley keeps no platform reference for it (files sent through parley are not kept)`,
        ),
      );
    });

    it('the key needs chat:messages; another instance does not see the message', async () => {
      const id = await inbound({ kind: 'image', media: dataUri(fixture('tiny.jpg')) });
      const contactsOnly = await t.newKey({ scopes: ['chat:contacts'] });
      assert.deepEqual(
        (await download(t, id, contactsOnly)).json(),
        bad(403, 'API key lacks required scope chat:messages'),
      );
      const other = await t.newInstance('test', 'other');
      const res = await t.app.inject({
        method: 'GET',
        url: `/v1/messages/${id}/media?from=${other.id}`,
        headers: { authorization: `Bearer ${t.key}` },
      });
      assert.deepEqual(JSON.parse(res.body), bad(404, `message ${id} not found`));
    });

    it('a file over MEDIA_MAX_MB is refused with 413 and nothing is kept', async () => {
      const big = randomBytes(1024 * 1024 + 1);
      const id = await inbound({ kind: 'document', media: dataUri(big), fileName: 'big.bin' });
      assert.deepEqual(
        (await download(t, id)).json(),
        bad(413, `media of message ${id} is ${big.length} bytes, larger than the 1 MB limit (MEDIA_MAX_MB)`),
      );
      // A size the sender understated: the bytes are counted as they arrive, and the file is refused the same.
      const row = await t.services.store.db
        .selectFrom('messages')
        .select('content')
        .where('instance_id', '=', t.instance.id)
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      await t.services.store.db
        .updateTable('messages')
        .set({ content: JSON.stringify({ ...JSON.parse(row.content), fileLength: 10 }) })
        .where('instance_id', '=', t.instance.id)
        .where('id', '=', id)
        .execute();
      assert.deepEqual(
        (await download(t, id)).json(),
        bad(413, `media of message ${id} is larger than the 1 MB limit (MEDIA_MAX_MB)`),
      );
    });

    it('the sandbox helper: field rules and its 16 MB limit', async () => {
      const post = (body: Record<string, unknown>) =>
        t.call('POST', '/v1/sandbox/inbound/media', { phone: PEER, ...body });
      const png = dataUri(fixture('tiny.png'), 'image/png');
      assert.deepEqual(
        (await post({ kind: 'audio', media: png, caption: 'x' })).body,
        bad(400, 'caption is only for image, video and document'),
      );
      assert.deepEqual(
        (await post({ kind: 'image', media: png, fileName: 'a.png' })).body,
        bad(400, 'fileName is only for document'),
      );
      assert.deepEqual(
        (await post({ kind: 'image', media: png, ptt: true })).body,
        bad(400, 'ptt is only for audio'),
      );
      assert.deepEqual(
        (await post({ kind: 'gif', media: png })).body,
        bad(400, 'kind must be one of image, video, audio, document, sticker'),
      );
      assert.deepEqual(
        (await post({ kind: 'image', media: 'https://example.com/a.png' })).body,
        bad(400, 'media must be a data URI (data:<type>;base64,<data>)'),
      );
      assert.deepEqual(
        (
          await post({
            kind: 'image',
            media: `data:image/png;base64,${'A'.repeat(Math.ceil((16 * 1024 * 1024 + 3) / 3) * 4)}`,
          })
        ).body,
        bad(413, 'media must be at most 16 MB'),
      );
    });

    it("retention and expiry: the local copy outlives the platform link; an expired link is uploaded again by the sender's phone", async () => {
      const keptId = await inbound({ kind: 'image', media: dataUri(fixture('tiny.jpg')) });
      const neverFetched = await inbound({ kind: 'image', media: dataUri(fixture('tiny.png')) });
      assert.equal((await download(t, keptId)).status, 200);
      t.clock.advance(SANDBOX_MEDIA_TTL_MS + DAY);
      // The platform's link expired: the phone uploads the file parley never fetched again; the one it
      // fetched is served from its copy.
      const renewed = await download(t, neverFetched);
      assert.equal(renewed.status, 200);
      assert.ok(renewed.bytes.equals(fixture('tiny.png')));
      assert.equal(await t.services.mediaRetention.runOnce(), 0, 'nothing older than 30 days yet');
      const kept = await download(t, keptId);
      assert.equal(kept.status, 200);
      assert.ok(kept.bytes.equals(fixture('tiny.jpg')));
      t.clock.advance(30 * DAY);
      assert.ok((await t.services.mediaRetention.runOnce()) >= 1, 'the kept file is pruned');
      // Pruned here and expired on the platform: fetched again after the phone uploads it again.
      const again = await download(t, keptId);
      assert.equal(again.status, 200);
      assert.ok(again.bytes.equals(fixture('tiny.jpg')));
    });

    it('works without a session in this process, and leaves the reported state as it was', async () => {
      const id = await inbound({ kind: 'image', media: dataUri(fixture('tiny.jpg')) });
      // As on a node that holds no lease on the instance (released: closed and forgotten, stored state untouched).
      await t.services.sessions.release(t.instance.id);
      assert.equal(t.services.sessions.existing(t.instance.id), undefined);
      const res = await download(t, id);
      assert.equal(res.status, 200, res.bytes.toString());
      assert.ok(res.bytes.equals(fixture('tiny.jpg')));
      assert.equal(t.services.sessions.existing(t.instance.id), undefined, 'no session kept for a download');
      const status = await t.call('GET', `/v1/session/status?from=${t.instance.id}`);
      assert.deepEqual(
        [status.body.data.connected, status.body.data.loggedIn, status.body.data.jid],
        [false, true, `${OWN}.0:1@s.whatsapp.net`],
      );
    });

    it('an expired link while the instance is not connected: 409, the phone cannot be asked', async () => {
      assert.equal((await t.call('POST', `/v1/session/connect?from=${t.instance.id}`)).status, 200);
      const id = await inbound({ kind: 'image', media: dataUri(fixture('tiny.gif')) });
      t.clock.advance(SANDBOX_MEDIA_TTL_MS + DAY);
      assert.equal((await t.call('POST', `/v1/session/disconnect?from=${t.instance.id}`)).status, 200);
      assert.deepEqual((await download(t, id)).json(), bad(409, 'instance is not connected'));
      // Connected again, the phone is asked and the file served.
      assert.equal((await t.call('POST', `/v1/session/connect?from=${t.instance.id}`)).status, 200);
      const served = await download(t, id);
      assert.equal(served.status, 200);
      assert.ok(served.bytes.equals(fixture('tiny.gif')));
    });
  });
}
