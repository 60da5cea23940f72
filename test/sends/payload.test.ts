import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Jid, OutgoingMessage } from '../../src/domain/messages.ts';
import { decodeSendPayload, encodeSendPayload } from '../../src/sends/payload.ts';

/** The stored form of a send job's message (docs/decisions/0009-sends-as-jobs.md). */
describe('send job payloads', () => {
  const to = '5511988887777@s.whatsapp.net' as Jid;

  it('stores a text as its JSON without the id, and reads it back under the job id', () => {
    const message: OutgoingMessage = {
      to,
      id: 'ignored',
      content: { kind: 'text', text: 'olá', linkPreview: false },
      quotedId: 'Q1',
    };
    const stored = encodeSendPayload(message);
    assert.equal(
      stored,
      '{"to":"5511988887777@s.whatsapp.net","content":{"kind":"text","text":"olá","linkPreview":false},"quotedId":"Q1"}',
    );
    assert.deepEqual(decodeSendPayload(stored, 'JOB1'), { ...message, id: 'JOB1' });
  });

  it("stores a media file's bytes as base64 under content.media.data and gives the same bytes back", () => {
    const bytes = Buffer.from([0, 1, 2, 250, 251, 252, 253, 254, 255]);
    const message: OutgoingMessage = {
      to,
      content: { kind: 'image', media: { data: bytes, mimetype: 'image/png' }, caption: 'a' },
    };
    const stored = encodeSendPayload(message);
    assert.deepEqual(JSON.parse(stored), {
      to,
      content: {
        kind: 'image',
        media: { data: bytes.toString('base64'), mimetype: 'image/png' },
        caption: 'a',
      },
    });
    const read = decodeSendPayload(stored, 'JOB2');
    assert.equal(read.id, 'JOB2');
    assert.ok(read.content.kind === 'image');
    assert.ok(Buffer.isBuffer(read.content.media.data));
    assert.deepEqual([...read.content.media.data], [...bytes]);
    assert.deepEqual(
      { ...read, content: { ...read.content, media: null } },
      {
        ...message,
        id: 'JOB2',
        content: { ...message.content, media: null },
      },
    );
  });
});
