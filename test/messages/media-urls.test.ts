import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { type Receiver, startMediaServer, startReceiver, TEST_CA } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { appFor, bad, fixture, OWN, PEER, storedContent } from './support.ts';

/**
 * Media sent by https URL (docs/decisions/0017-messages-and-media.md, docs/decisions/0020-security-promises.md):
 * fetched through the outbound guard from a real HTTPS server, the file name taken from the URL, redirects not
 * followed, an oversize stream cut off at the limit, and private, loopback and metadata addresses refused without a
 * connection unless allowed. Media sent by data URI: media.test.ts.
 */
for (const dialect of testDialects()) {
  describe(`media sends by https URL through the outbound guard (docs/decisions/0017-messages-and-media.md, docs/decisions/0020-security-promises.md) [${dialect}]`, () => {
    let t: TestApp;
    let receiver: Receiver;
    before(async () => {
      t = await appFor(dialect, { env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32' }, outboundCa: TEST_CA });
      await loginSandbox(t, OWN);
      receiver = await startReceiver({ path: '/files/report%20Q1.pdf' });
    });
    after(async () => {
      await receiver.close();
      await t.close();
    });

    it('fetches an image and a document; the file name defaults from the URL', async () => {
      const png = fixture('tiny.png');
      const pdf = fixture('doc.pdf');
      receiver.enqueue({ body: png, headers: { 'content-type': 'application/pdf' } }, { body: pdf });
      const image = await t.call('POST', '/v1/messages/send/image', {
        phone: PEER,
        image: `${receiver.origin}/a.png`,
      });
      assert.equal(image.status, 200, JSON.stringify(image.body));
      assert.deepEqual(await storedContent(t, image.body.data.id), {
        kind: 'image',
        mimetype: 'image/png',
        fileLength: png.length,
      });
      const doc = await t.call('POST', '/v1/messages/send/document', { phone: PEER, document: receiver.url });
      assert.equal(doc.status, 200, JSON.stringify(doc.body));
      assert.deepEqual(await storedContent(t, doc.body.data.id), {
        kind: 'document',
        mimetype: 'application/pdf',
        fileLength: pdf.length,
        fileName: 'report Q1.pdf',
      });
      assert.deepEqual(
        receiver.requests.slice(-2).map((r) => [r.method, r.url]),
        [
          ['GET', '/a.png'],
          ['GET', '/files/report%20Q1.pdf'],
        ],
      );
    });

    it('does not follow redirects and reports non-2xx answers', async () => {
      receiver.enqueue({ status: 302, headers: { location: 'https://example.com/' } }, { status: 404 });
      const redirect = await t.call('POST', '/v1/messages/send/image', { phone: PEER, image: receiver.url });
      assert.deepEqual(
        redirect.body,
        bad(400, 'image could not be fetched: the server answered HTTP 302 (redirects are not followed)'),
      );
      const missing = await t.call('POST', '/v1/messages/send/image', { phone: PEER, image: receiver.url });
      assert.deepEqual(missing.body, bad(400, 'image could not be fetched: the server answered HTTP 404'));
    });

    it('cuts an oversize stream off at the limit (413) and refuses an announced oversize body', async () => {
      const server = await startMediaServer({
        bytes: 4 * 1024 * 1024,
        contentLength: false,
        chunkSize: 16 * 1024,
      });
      try {
        const res = await t.call('POST', '/v1/messages/send/sticker', { phone: PEER, sticker: server.url });
        assert.deepEqual(res.body, bad(413, 'sticker must be at most 500 KB'));
        const [request] = await server.waitFor((r) => r[0]?.reply.state === 'aborted', 10_000);
        assert.ok(request && request.reply.bytesSent < 4 * 1024 * 1024, 'the stream was not read to the end');
      } finally {
        await server.close();
      }
      receiver.enqueue({ bytes: 17 * 1024 * 1024 });
      const announced = await t.call('POST', '/v1/messages/send/image', { phone: PEER, image: receiver.url });
      assert.deepEqual(announced.body, bad(413, 'image must be at most 16 MB'));
    });
  });

  describe(`media URLs to private addresses without an allowance (docs/decisions/0020-security-promises.md) [${dialect}]`, () => {
    let t: TestApp;
    let receiver: Receiver;
    before(async () => {
      t = await appFor(dialect, { outboundCa: TEST_CA });
      await loginSandbox(t, OWN);
      receiver = await startReceiver();
    });
    after(async () => {
      await receiver.close();
      await t.close();
    });

    it('refuses loopback, private and metadata addresses without connecting, and says no more', async () => {
      // A name resolving to loopback reads the same as one that does not resolve (.invalid, RFC 6761):
      // the endpoint cannot be used to map internal names to addresses.
      for (const url of [
        receiver.url,
        `https://localhost:${receiver.port}/a.png`,
        'https://10.0.0.1/a.png',
        'https://169.254.169.254/latest',
        'https://[::1]/a',
        'https://parley-test.invalid/a.png',
      ]) {
        const res = await t.call('POST', '/v1/messages/send/image', { phone: PEER, image: url });
        assert.deepEqual(
          res.body,
          bad(400, 'image could not be fetched: the host does not resolve to an allowed public address'),
          url,
        );
      }
      assert.equal(receiver.requests.length, 0);
    });
  });
}
