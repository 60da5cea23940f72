/**
 * Replies to interactive messages (docs/decisions/0110-interactive-replies.md): the platform's
 * buttonsResponseMessage, listResponseMessage, templateButtonReplyMessage and interactiveResponseMessage
 * (nativeFlowResponseMessage), encoded with Baileys' protobuf encoder into a `<message>` stanza and decoded by
 * Baileys as the socket does, map to kind `interactive_reply` with the pick (id, text shown, extras) and the quoted
 * interactive message; the Message webhook body carries the platform-named member with `conversation` the text, and
 * the stored message reads back with that kind on SQLite (and PostgreSQL when TEST_DATABASE_URL is set).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { proto } from 'baileys';
import type { EngineMessage, MessageContent } from '../../src/domain/messages.ts';
import { toEngineMessage } from '../../src/engines/baileys/incoming.ts';
import { messageBody } from '../../src/events/normalise.ts';
import { createTestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { type MappingFixture, mappingFixture, messageStanza, NOW, PEER } from './mapping-fixture.ts';

/** The interactive message the user answers (an id the business's send had). */
const ASKED = '3EB0A1B2C3D4E5F60718';
const context = { stanzaId: ASKED, participant: '5511999990001@s.whatsapp.net' };

/** Each answer as the platform sends it, what parley maps it to, and its webhook body. */
const CASES: { name: string; message: proto.IMessage; content: MessageContent; body: object }[] = [
  {
    name: 'a reply button picked (buttonsResponseMessage)',
    message: {
      buttonsResponseMessage: {
        selectedButtonId: 'confirm-42',
        selectedDisplayText: 'Yes, confirm',
        type: proto.Message.ButtonsResponseMessage.Type.DISPLAY_TEXT,
        contextInfo: context,
      },
    },
    content: {
      kind: 'interactive_reply',
      text: 'Yes, confirm',
      interactive: { type: 'buttons', selectedId: 'confirm-42' },
      quotedId: ASKED,
    },
    body: {
      conversation: 'Yes, confirm',
      buttonsResponseMessage: { selectedButtonId: 'confirm-42', selectedDisplayText: 'Yes, confirm' },
      contextInfo: { stanzaId: ASKED },
    },
  },
  {
    name: 'a list row picked (listResponseMessage)',
    message: {
      listResponseMessage: {
        title: 'Large pizza',
        listType: proto.Message.ListResponseMessage.ListType.SINGLE_SELECT,
        singleSelectReply: { selectedRowId: 'pizza-l' },
        description: '35 cm, 8 slices',
        contextInfo: context,
      },
    },
    content: {
      kind: 'interactive_reply',
      text: 'Large pizza',
      interactive: { type: 'list', selectedId: 'pizza-l', description: '35 cm, 8 slices' },
      quotedId: ASKED,
    },
    body: {
      conversation: 'Large pizza',
      listResponseMessage: {
        title: 'Large pizza',
        singleSelectReply: { selectedRowId: 'pizza-l' },
        description: '35 cm, 8 slices',
      },
      contextInfo: { stanzaId: ASKED },
    },
  },
  {
    name: "a template's quick-reply button (templateButtonReplyMessage)",
    message: {
      templateButtonReplyMessage: {
        selectedId: 'stop-promos',
        selectedDisplayText: 'Stop promotions',
        selectedIndex: 1,
        contextInfo: context,
      },
    },
    content: {
      kind: 'interactive_reply',
      text: 'Stop promotions',
      interactive: { type: 'template', selectedId: 'stop-promos', selectedIndex: 1 },
      quotedId: ASKED,
    },
    body: {
      conversation: 'Stop promotions',
      templateButtonReplyMessage: {
        selectedId: 'stop-promos',
        selectedDisplayText: 'Stop promotions',
        selectedIndex: 1,
      },
      contextInfo: { stanzaId: ASKED },
    },
  },
  {
    name: 'a flow completed (interactiveResponseMessage with nativeFlowResponseMessage)',
    message: {
      interactiveResponseMessage: {
        body: { text: 'Sent', format: proto.Message.InteractiveResponseMessage.Body.Format.DEFAULT },
        nativeFlowResponseMessage: {
          name: 'booking_flow',
          paramsJson: '{"date":"2026-01-20","people":"4"}',
          version: 3,
        },
        contextInfo: context,
      },
    },
    content: {
      kind: 'interactive_reply',
      text: 'Sent',
      interactive: {
        type: 'flow',
        selectedId: '',
        flow: { name: 'booking_flow', paramsJson: '{"date":"2026-01-20","people":"4"}', version: 3 },
      },
      quotedId: ASKED,
    },
    body: {
      conversation: 'Sent',
      interactiveResponseMessage: {
        body: { text: 'Sent' },
        nativeFlowResponseMessage: {
          name: 'booking_flow',
          paramsJson: '{"date":"2026-01-20","people":"4"}',
          version: 3,
        },
      },
      contextInfo: { stanzaId: ASKED },
    },
  },
];

describe("replies to interactive messages, on fixtures from Baileys' encoders/decoders", () => {
  let fixture: MappingFixture;
  before(async () => {
    fixture = await mappingFixture();
  });
  after(() => fixture.cleanup());

  /** `message` from {@link PEER} through Baileys' encoder and decoder, mapped as the live engine maps it. */
  async function mapped(message: proto.IMessage): Promise<EngineMessage> {
    const decoded = await fixture.decode(messageStanza({ from: PEER, notify: 'Ana' }, message));
    const engine = await toEngineMessage(decoded, fixture.ctx, NOW);
    assert.ok(engine, 'a message');
    return engine;
  }

  for (const { name, message, content, body } of CASES) {
    it(`${name}: kind interactive_reply with the pick, the text shown and the quoted message`, async () => {
      const engine = await mapped(message);
      assert.deepEqual(engine.content, content);
      assert.deepEqual(engine.source, { chat: PEER, sender: PEER, isFromMe: false, isGroup: false });
      assert.deepEqual(messageBody(engine.content), body);
    });
  }

  it('wrapped in an ephemeral message (disappearing messages on), it is unwrapped as other kinds are', async () => {
    const first = CASES[0];
    assert.ok(first);
    const engine = await mapped({ ephemeralMessage: { message: first.message } });
    assert.deepEqual(engine.content, first.content);
  });

  it('absent fields are empty, not missing: a bare answer still names its type', async () => {
    const cases: [proto.IMessage, MessageContent][] = [
      [
        { buttonsResponseMessage: {} },
        { kind: 'interactive_reply', text: '', interactive: { type: 'buttons', selectedId: '' } },
      ],
      [
        { listResponseMessage: {} },
        { kind: 'interactive_reply', text: '', interactive: { type: 'list', selectedId: '' } },
      ],
      [
        { templateButtonReplyMessage: {} },
        { kind: 'interactive_reply', text: '', interactive: { type: 'template', selectedId: '' } },
      ],
      [
        { interactiveResponseMessage: { nativeFlowResponseMessage: {} } },
        {
          kind: 'interactive_reply',
          text: '',
          interactive: { type: 'flow', selectedId: '', flow: { name: '', paramsJson: '', version: 0 } },
        },
      ],
    ];
    for (const [message, content] of cases) assert.deepEqual((await mapped(message)).content, content);
  });

  it('an interactiveResponseMessage without a native flow answer stays other', async () => {
    assert.deepEqual((await mapped({ interactiveResponseMessage: { body: { text: 'x' } } })).content, {
      kind: 'other',
    });
  });
});

for (const dialect of testDialects()) {
  describe(`a stored interactive reply reads back as kind interactive_reply (${dialect})`, () => {
    it('GET /v1/messages/{id} and the history show kind interactive_reply and the platform-named body', async () => {
      const t = await createTestApp({ dialect });
      try {
        for (const [i, { content }] of CASES.entries()) {
          await t.services.recorder.record(t.instance.id, {
            type: 'message',
            message: {
              id: `3A00000000000${i}`,
              source: { chat: PEER, sender: PEER, isFromMe: false, isGroup: false },
              pushName: 'Ana',
              timestamp: NOW + i,
              content,
            },
          });
        }
        for (const [i, { body }] of CASES.entries()) {
          const res = await t.call('GET', `/v1/messages/3A00000000000${i}`);
          assert.equal(res.status, 200, JSON.stringify(res.body));
          assert.equal(res.body.data.kind, 'interactive_reply');
          assert.deepEqual(res.body.data.message, body);
        }
        const history = await t.call('GET', `/v1/chats/${PEER}/messages`);
        assert.equal(history.status, 200, JSON.stringify(history.body));
        assert.deepEqual(
          history.body.data.messages.map((m: { kind: string }) => m.kind),
          CASES.map(() => 'interactive_reply'),
        );
        const forward = await t.call('POST', '/v1/messages/forward', {
          phone: '5511977776666',
          messageId: '3A000000000000',
        });
        assert.equal(forward.status, 400, JSON.stringify(forward.body));
        assert.equal(
          forward.body.error.message,
          'message 3A000000000000 cannot be forwarded (it is an interactive_reply message)',
        );
      } finally {
        await t.close();
      }
    });
  });
}
