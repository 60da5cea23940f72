/**
 * POST /v1/messages/forward of received media keeps what the message is (docs/api.md#post-v1messagesforward:
 * "Sends a stored message again to `phone`, marked forwarded, as a phone's Forward does"; decision 0041: media with
 * the file read again, caption and file name kept). An audio file the user sent (not a voice note) must not become a
 * voice note, and an animated sticker must not go out flagged static.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { OutgoingMessage } from '../../src/domain/messages.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { appFor, dataUri, fixture, OWN, PEER } from './support.ts';

const OTHER = '5511977776666';

for (const dialect of testDialects()) {
  describe(`forward of received audio files and animated stickers [${dialect}]`, () => {
    let t: TestApp;
    const sent: OutgoingMessage[] = [];
    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
      const session = t.services.sessions.existing(t.instance.id);
      assert.ok(session);
      const original = session.send.bind(session);
      session.send = (message) => {
        sent.push(message);
        return original(message);
      };
    });
    after(() => t.close());

    it('an audio file (ptt false) is forwarded as an audio file, not as a voice note', async () => {
      const mp3 = fixture('tone.mp3');
      const inbound = await t.call('POST', '/v1/sandbox/inbound/media', {
        phone: PEER,
        kind: 'audio',
        ptt: false,
        media: dataUri(mp3, 'audio/mpeg'),
      });
      assert.equal(inbound.status, 200, JSON.stringify(inbound.body));
      const received = await t.call('GET', `/v1/messages/${inbound.body.data.id}`);
      assert.equal(received.body.data.message.audioMessage.ptt, false, 'received as an audio file');
      const res = await t.call('POST', '/v1/messages/forward', {
        phone: OTHER,
        messageId: inbound.body.data.id,
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const forwarded = await t.call('GET', `/v1/messages/${res.body.data.id}`);
      assert.equal(
        forwarded.body.data.message.audioMessage.ptt,
        false,
        `forwarded: ${JSON.stringify(forwarded.body.data.message)}`,
      );
    });

    it('an animated sticker is forwarded as an animated sticker', async () => {
      const inbound = await t.call('POST', '/v1/sandbox/inbound/media', {
        phone: PEER,
        kind: 'sticker',
        media: dataUri(fixture('animated.webp'), 'image/webp'),
      });
      assert.equal(inbound.status, 200, JSON.stringify(inbound.body));
      const res = await t.call('POST', '/v1/messages/forward', {
        phone: OTHER,
        messageId: inbound.body.data.id,
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const last = sent.at(-1);
      assert.equal(last?.content.kind, 'sticker');
      if (last?.content.kind === 'sticker') assert.equal(last.content.animated, true, 'flagged animated');
    });
  });
}
