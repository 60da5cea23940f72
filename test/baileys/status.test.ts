/**
 * The live engine's status updates over a fake socket (src/engines/baileys/operations.ts, outgoing.ts;
 * docs/decisions/0044-status-stories.md): a message to status@broadcast is built by Baileys' own
 * `generateWAMessage` — a text status as an extendedTextMessage with `backgroundArgb` and `font`
 * (Utils/messages.js) — and relayed with the audience as `statusJidList` (Socket/messages-send.js relayMessage); the
 * recorded message's chat is status@broadcast.
 */

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { generateWAMessage } from 'baileys';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { statusTextOptions } from '../../src/engines/baileys/outgoing.ts';
import type { EngineSession } from '../../src/engines/engine.ts';
import { type ConnectedFakeSession, connectedFakeSession } from './connected-session.ts';
import { type FakeSocket, ME } from './fake-socket.ts';
import type { RecordingContext } from './support.ts';

const STATUS = 'status@broadcast';
const ANA = '5511988887777@s.whatsapp.net';
const BIA = '5511977776666@s.whatsapp.net';
const ME_PHONE_JID = `${ME.phone}@s.whatsapp.net`;

describe('live engine: status updates', () => {
  let connected: ConnectedFakeSession;
  let session: EngineSession;
  let rc: RecordingContext;
  let sock: () => FakeSocket;

  before(async () => {
    connected = await connectedFakeSession(() => Date.parse('2030-01-01T00:00:00Z'));
    ({ session, rc, sock } = connected);
  });
  after(() => connected.close());

  const messages = (events: EngineEvent[]) =>
    events.filter((e): e is Extract<EngineEvent, { type: 'message' }> => e.type === 'message');

  it('a text status: extendedTextMessage with backgroundArgb and font, relayed to status@broadcast with statusJidList', async () => {
    const sent = await session.send({
      to: STATUS,
      id: '3EB0STATUS0000000000AA',
      content: {
        kind: 'text',
        text: 'Open until 8',
        linkPreview: false,
        backgroundArgb: 0xff1e88e5,
        font: 1,
      },
      statusJidList: [ANA, BIA],
    });
    assert.equal(sent.id, '3EB0STATUS0000000000AA');
    const relayed = sock().relayed.at(-1);
    assert.equal(relayed?.jid, STATUS);
    assert.equal(relayed?.messageId, '3EB0STATUS0000000000AA');
    assert.deepEqual(relayed?.statusJidList, [ANA, BIA]);
    const text = relayed?.message.extendedTextMessage;
    assert.equal(text?.text, 'Open until 8');
    assert.equal(text?.backgroundArgb, 0xff1e88e5);
    assert.equal(text?.font, 1);
    // The same content Baileys' own sendMessage builds from its documented options.
    const reference = await generateWAMessage(
      STATUS,
      { text: 'Open until 8', linkPreview: null },
      { userJid: ME.id, upload: sock().waUploadToServer, backgroundColor: '#FF1E88E5', font: 1 },
    );
    assert.deepEqual(
      {
        text: reference.message?.extendedTextMessage?.text,
        backgroundArgb: reference.message?.extendedTextMessage?.backgroundArgb,
        font: reference.message?.extendedTextMessage?.font,
      },
      { text: text?.text, backgroundArgb: text?.backgroundArgb, font: text?.font },
    );
    assert.deepEqual(messages(rc.events).at(-1)?.message.source, {
      chat: STATUS,
      sender: ME_PHONE_JID,
      isFromMe: true,
      isGroup: false,
    });
    assert.deepEqual(sock().presence, [], 'no presence subscription for a status');
  });

  it('an image status: imageMessage with caption, the audience as statusJidList', async () => {
    const png = Buffer.from(
      'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
      'base64',
    );
    await session.send({
      to: STATUS,
      content: { kind: 'image', media: { data: png, mimetype: 'image/png' }, caption: 'New in store' },
      statusJidList: [BIA],
    });
    const relayed = sock().relayed.at(-1);
    assert.equal(relayed?.jid, STATUS);
    assert.deepEqual(relayed?.statusJidList, [BIA]);
    assert.equal(relayed?.message.imageMessage?.caption, 'New in store');
    assert.equal(relayed?.message.imageMessage?.mimetype, 'image/png');
    assert.equal(messages(rc.events).at(-1)?.message.content.kind, 'image');
  });

  it('the colour goes to Baileys as #AARRGGBB text; a plain text has no status options', () => {
    assert.deepEqual(
      statusTextOptions({ kind: 'text', text: 'x', linkPreview: false, backgroundArgb: 0x0000ff00 }),
      { backgroundColor: '#0000FF00' },
    );
    assert.deepEqual(statusTextOptions({ kind: 'text', text: 'x', linkPreview: false }), {});
  });
});
