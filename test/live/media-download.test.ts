/**
 * Received media with a live key, end to end against the platform simulator: a simulated user's phone encrypts
 * a file, stores it on the simulator's HTTPS media server and sends the message (POST /control/media); parley's
 * Message webhook carries the file's metadata and `media.url`, and GET /v1/messages/{id}/media downloads the
 * file from the media server (trusted through PLATFORM_CA_FILE), checks its MAC and hashes, decrypts it, and
 * returns byte for byte what the user sent. Once the simulator's media links expire (DELETE /control/media),
 * parley asks the sender's phone to upload the file again (docs/decisions/0046-media-re-upload.md). Without the
 * CA the download is refused by TLS. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { findStoredMessage } from '../../src/store/messages.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { bodies } from '../webhooks/support.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

const fixture = (name: string) => readFileSync(new URL(`../fixtures/media/${name}`, import.meta.url));

/** GET the file of message `id` with the live key (raw bytes and headers). */
async function download(app: LiveApp, id: string) {
  const res = await app.t.app.inject({
    method: 'GET',
    url: `/v1/messages/${id}/media?from=${app.instanceId}`,
    headers: { authorization: `Bearer ${app.liveKey}` },
  });
  return { status: res.statusCode, headers: res.headers, bytes: res.rawPayload, body: res.body };
}

const SENDS = [
  {
    name: 'image',
    request: { kind: 'image', data: fixture('tiny.jpg').toString('base64'), caption: 'Broken part' },
    bytes: fixture('tiny.jpg'),
    type: 'image/jpeg',
    media: {
      kind: 'image',
      mimetype: 'image/jpeg',
      size: fixture('tiny.jpg').length,
      caption: 'Broken part',
    },
  },
  {
    name: 'voice note',
    request: { kind: 'audio', data: fixture('voice.ogg').toString('base64'), ptt: true },
    bytes: fixture('voice.ogg'),
    type: 'audio/ogg; codecs=opus',
    media: { kind: 'audio', mimetype: 'audio/ogg; codecs=opus', size: fixture('voice.ogg').length },
  },
  {
    name: 'document',
    request: {
      kind: 'document',
      data: fixture('doc.pdf').toString('base64'),
      mimetype: 'application/pdf',
      fileName: 'order.pdf',
      caption: 'My order',
    },
    bytes: fixture('doc.pdf'),
    type: 'application/pdf',
    media: {
      kind: 'document',
      mimetype: 'application/pdf',
      size: fixture('doc.pdf').length,
      caption: 'My order',
      fileName: 'order.pdf',
    },
  },
  {
    name: 'video',
    request: { kind: 'video', data: fixture('clip.mp4').toString('base64'), caption: 'Unboxing' },
    bytes: fixture('clip.mp4'),
    type: 'video/mp4',
    media: { kind: 'video', mimetype: 'video/mp4', size: fixture('clip.mp4').length, caption: 'Unboxing' },
  },
  {
    name: 'sticker',
    request: { kind: 'sticker', data: fixture('tiny.webp').toString('base64') },
    bytes: fixture('tiny.webp'),
    type: 'image/webp',
    media: { kind: 'sticker', mimetype: 'image/webp', size: fixture('tiny.webp').length },
  },
];

for (const dialect of testDialects()) {
  describe(`received media downloaded from the simulator's media server (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    const shop = '5511999990000';
    const ana = '5511988887777';

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
      await pairLive(sim, app, shop);
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    for (const send of SENDS) {
      it(`${send.name}: the webhook's media fields are exact and GET returns the bytes the user sent`, async () => {
        const sent = await control(sim, 'POST', '/media', { from: ana, to: shop, ...send.request });
        assert.equal(sent.status, 201, JSON.stringify(sent.body));
        const id: string = sent.body.id;
        const body = await until(`the ${send.name} Message webhook`, () =>
          bodies(receiver.requests).find((b) => b.type === 'Message' && b.event.info.id === id),
        );
        assert.deepEqual(body.event.media, {
          ...send.media,
          url: `${app.t.config.publicUrl}/v1/messages/${id}/media?from=${app.instanceId}`,
        });
        const first = await download(app, id);
        assert.equal(first.status, 200, first.body);
        assert.ok(first.bytes.equals(send.bytes), 'byte for byte what the user sent');
        assert.equal(first.headers['content-type'], send.type);
        assert.equal(first.headers['content-length'], String(send.bytes.length));
        // Served again from the local store: the same bytes.
        const again = await download(app, id);
        assert.equal(again.status, 200);
        assert.ok(again.bytes.equals(send.bytes));
      });
    }

    /** Ana sends fixture `name` as an image; resolves with the message id once parley's webhook reported it. */
    const sendImage = async (name: string) => {
      const sent = await control(sim, 'POST', '/media', {
        from: ana,
        to: shop,
        kind: 'image',
        data: fixture(name).toString('base64'),
      });
      assert.equal(sent.status, 201, JSON.stringify(sent.body));
      await until('the Message webhook', () =>
        bodies(receiver.requests).find((b) => b.type === 'Message' && b.event.info.id === sent.body.id),
      );
      return sent.body.id as string;
    };
    /** The simulator's re-upload requests for message `id`. */
    const retriesOf = async (id: string) => {
      const res = await control(sim, 'GET', '/media/retries');
      assert.equal(res.status, 200);
      return (res.body.retries as { id: string; from: string; sender: string; outcome: string }[]).filter(
        (r) => r.id === id,
      );
    };
    const expire = async () => {
      const expired = await control(sim, 'DELETE', '/media');
      assert.equal(expired.status, 200, JSON.stringify(expired.body));
      return expired.body.removed as number;
    };
    const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

    it('an expired file: the phone uploads it again once (concurrent downloads share the request), the new place is stored, the bytes are the original', async () => {
      const kept = await sendImage('tiny.png');
      const id = await sendImage('tiny.jpg');
      assert.equal((await download(app, kept)).status, 200);
      assert.ok((await expire()) >= 2);
      const before = await findStoredMessage(app.t.services.store.db, app.instanceId, id);
      const [first, second] = await Promise.all([download(app, id), download(app, id)]);
      for (const res of [first, second]) {
        assert.equal(res.status, 200, res.body);
        assert.equal(sha(res.bytes), sha(fixture('tiny.jpg')), 'the exact bytes Ana sent');
      }
      const retries = await retriesOf(id);
      assert.deepEqual(
        retries.map((r) => [r.from, r.sender, r.outcome]),
        [[shop, ana, 'success']],
        'one re-upload request, answered by the phone of Ana',
      );
      // The message's reference now names the new direct path (durable: on any node, after any restart).
      const after = await findStoredMessage(app.t.services.store.db, app.instanceId, id);
      const oldRef = JSON.parse(before?.content.download ?? '{}') as { directPath: string; mediaKey: string };
      const newRef = JSON.parse(after?.content.download ?? '{}') as { directPath: string; mediaKey: string };
      assert.notEqual(newRef.directPath, oldRef.directPath);
      assert.equal(newRef.mediaKey, oldRef.mediaKey);
      assert.ok(sim.media.get(newRef.directPath), 'the media server serves the file at the stored path');
      // A file parley kept is served from its copy: the phone is never asked.
      const served = await download(app, kept);
      assert.equal(served.status, 200);
      assert.ok(served.bytes.equals(fixture('tiny.png')));
      assert.deepEqual(await retriesOf(kept), []);
      // Without parley's local copy, the next download goes to the new place and does not ask the phone again.
      await rm(join(app.t.config.media.dir, app.instanceId), { recursive: true, force: true });
      const again = await download(app, id);
      assert.equal(again.status, 200, again.body);
      assert.equal(sha(again.bytes), sha(fixture('tiny.jpg')));
      assert.equal((await retriesOf(id)).length, 1, 'no second re-upload request');
    });

    it('an expired file the phone no longer has: 410 with the reason', async () => {
      const id = await sendImage('tiny.gif');
      assert.ok((await expire()) >= 1);
      const deleted = await control(sim, 'DELETE', `/users/${ana}/media`);
      assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
      assert.ok(deleted.body.removed >= 1);
      const gone = await download(app, id);
      assert.equal(gone.status, 410, gone.body);
      assert.deepEqual(JSON.parse(gone.body), {
        error: {
          code: 410,
          message: `the platform no longer has the media of message ${id} (its media links expire after a while), parley had not kept a copy, and the sender's phone could not upload it again: it no longer has the file (NOT_FOUND)`,
        },
      });
      assert.deepEqual(
        (await retriesOf(id)).map((r) => r.outcome),
        ['not_found'],
      );
    });
  });
}

describe('media downloads verify the media server certificate', () => {
  let sim: Simulator;
  let receiver: Receiver;
  let app: LiveApp;
  const shop = '5511999990000';
  const ana = '5511988887777';

  before(async () => {
    sim = await startTestSimulator();
    receiver = await startReceiver();
    app = await liveApp(sim, { trustMediaCa: false });
    await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
    await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
    await pairLive(sim, app, shop);
    assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
  });
  after(async () => {
    await app.t.close();
    await receiver.close();
    await sim.close();
  });

  it('without PLATFORM_CA_FILE the download is refused by TLS (503) and nothing is kept', async () => {
    const sent = await control(sim, 'POST', '/media', {
      from: ana,
      to: shop,
      kind: 'image',
      data: fixture('tiny.jpg').toString('base64'),
    });
    assert.equal(sent.status, 201, JSON.stringify(sent.body));
    await until('the Message webhook', () =>
      bodies(receiver.requests).find((b) => b.type === 'Message' && b.event.info.id === sent.body.id),
    );
    for (let i = 0; i < 2; i++) {
      const res = await download(app, sent.body.id);
      assert.equal(res.status, 503, res.body);
      assert.match(
        JSON.parse(res.body).error.message,
        /^the platform's media host could not be reached: .*(self-signed|unable to verify|certificate)/,
      );
    }
  });
});
