/**
 * POST /v1/messages/send/audio takes OGG/Opus, MP3, M4A or WAV (docs/decisions/0017-messages-and-media.md table;
 * the 400 names "OGG (Opus), MP3, M4A or WAV"). An OGG file holding Vorbis (not Opus) is neither: it must be refused
 * naming the formats, not accepted — the live engine sends it as a voice note labelled `audio/ogg; codecs=opus`
 * (src/engines/baileys/outgoing.ts voiceNoteMimetype), a type its bytes are not.
 * test/fixtures/media/tone-vorbis.ogg: 0.5 s sine, `ffmpeg -f lavfi -i sine=… -c:a libvorbis`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { appFor, bad, dataUri, fixture, OWN, PEER } from './support.ts';

for (const dialect of testDialects()) {
  describe(`audio sends: OGG that is not Opus [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
      await loginSandbox(t, OWN);
    });
    after(() => t.close());

    it('an OGG/Vorbis file is refused naming the formats (400), not sent as an Opus voice note', async () => {
      const res = await t.call('POST', '/v1/messages/send/audio', {
        phone: PEER,
        audio: dataUri(fixture('tone-vorbis.ogg'), 'audio/ogg'),
      });
      assert.deepEqual(res.body, bad(400, 'audio must be OGG (Opus), MP3, M4A or WAV'));
    });
  });
}
