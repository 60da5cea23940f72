/**
 * Status updates (stories) on the sandbox (docs/api.md#status, docs/decisions/0044-status-stories.md): exact 200
 * bodies, 400s naming the field, the default audience and its empty case, scope 403, what each simulated contact
 * saw, the stored message and its events, a view coming back as a receipt, Idempotency-Key and the async path.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { OutgoingMessage } from '../../src/domain/messages.ts';
import type { SandboxStatus } from '../../src/engines/sandbox/status.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import {
  appFor,
  bad,
  dataUri,
  fixture,
  messageRow,
  OWN,
  OWN_ID,
  PEER,
  RFC3339,
  sendJobRow,
  storedBodies,
  UNREGISTERED,
} from './support.ts';

const BIA = '5511977776666';
const STATUS = 'status@broadcast';

/** The statuses the sandbox shows contact `phone` (all the account posted when omitted). */
async function statusesOf(t: TestApp, phone?: string): Promise<SandboxStatus[]> {
  const session = t.services.sessions.ready(t.instance) as unknown as {
    statuses(phone?: string): Promise<SandboxStatus[]>;
  };
  return session.statuses(phone);
}

/** A 200 answer's data checked for shape, returned for exact comparison. */
function sent(res: { status: number; body: any }, recipients: number) {
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const { id, timestamp } = res.body.data;
  assert.match(id, OWN_ID);
  assert.match(timestamp, RFC3339);
  assert.deepEqual(res.body, {
    success: true,
    code: 200,
    data: { details: 'Sent', id, timestamp, recipients },
  });
  return res.body.data as { id: string; timestamp: string };
}

for (const dialect of testDialects()) {
  describe(`status updates (docs/api.md#status) [${dialect}]`, () => {
    let t: TestApp;
    let textId = '';
    const relayed: OutgoingMessage[] = [];
    before(async () => {
      t = await appFor(dialect);
    });
    after(() => t.close());

    it('409 before login, and 409 while the instance knows no contacts and none are named', async () => {
      const before = await t.call('POST', '/v1/status/text', { body: 'hi' });
      assert.deepEqual(before.body, bad(409, 'instance is not logged in'));
      await loginSandbox(t, OWN);
      const session = t.services.sessions.existing(t.instance.id);
      assert.ok(session);
      const original = session.send.bind(session);
      session.send = (message) => {
        relayed.push(message);
        return original(message);
      };
      const empty = await t.call('POST', '/v1/status/text', { body: 'hi' });
      assert.equal(empty.status, 409);
      assert.deepEqual(
        empty.body,
        bad(
          409,
          'no contacts to show the status to: the instance has exchanged no messages yet; name them in contacts',
        ),
      );
    });

    it('a text status goes to the contacts parley knows, most recent first, with its colour and font', async () => {
      for (const phone of [PEER, BIA]) {
        const inbound = await t.call('POST', '/v1/sandbox/inbound', { phone, body: 'hello' });
        assert.equal(inbound.status, 200, JSON.stringify(inbound.body));
        t.clock.advance(1000);
      }
      const res = await t.call('POST', '/v1/status/text', {
        body: 'Open until 8 pm today',
        backgroundColor: '#1E88E5',
        font: 1,
      });
      const data = sent(res, 2);
      textId = data.id;
      const expected: SandboxStatus = {
        id: textId,
        from: OWN,
        kind: 'text',
        text: 'Open until 8 pm today',
        backgroundArgb: 0xff1e88e5,
        font: 1,
        timestamp: Date.parse(data.timestamp),
        recipients: [BIA, PEER],
        views: {},
      };
      assert.deepEqual(await statusesOf(t, PEER), [expected]);
      assert.deepEqual(await statusesOf(t, BIA), [expected]);
      const row = await messageRow(t, textId);
      assert.equal(row?.chat, STATUS);
      assert.equal(row?.state, 'sent');
      assert.deepEqual(JSON.parse(row?.content ?? '{}'), { kind: 'text', text: 'Open until 8 pm today' });
      const message = (await storedBodies(t, 'Message')).find((b) => b.event.info.id === textId);
      assert.deepEqual(message?.event.info.messageSource, {
        chat: STATUS,
        sender: `${OWN}@s.whatsapp.net`,
        isFromMe: true,
        isGroup: false,
      });
      // A status is not a chat: the chat list leaves status@broadcast out.
      const chats = await t.call('GET', '/v1/chats');
      assert.deepEqual(chats.body.data.chats.map((c: { jid: string }) => c.jid).sort(), [
        `${BIA}@s.whatsapp.net`,
        `${PEER}@s.whatsapp.net`,
      ]);
      const job = await sendJobRow(t, textId);
      assert.deepEqual(
        { chat: job.chat, status: job.status, kind: job.kind },
        { chat: STATUS, status: 'sent', kind: 'text' },
      );
      // What the engine was asked to relay: a message to status@broadcast with its audience and style.
      assert.deepEqual(relayed.at(-1), {
        to: STATUS,
        id: textId,
        content: {
          kind: 'text',
          text: 'Open until 8 pm today',
          linkPreview: false,
          backgroundArgb: 0xff1e88e5,
          font: 1,
        },
        statusJidList: [`${BIA}@s.whatsapp.net`, `${PEER}@s.whatsapp.net`],
      });
    });

    it('#AARRGGBB keeps its alpha; an explicit audience is used as given, the unregistered reached by none', async () => {
      const res = await t.call('POST', '/v1/status/text', {
        body: 'Half see-through',
        backgroundColor: '#80ff0000',
        contacts: [PEER, UNREGISTERED],
      });
      const { id } = sent(res, 2);
      const [status] = (await statusesOf(t)).filter((s) => s.id === id);
      assert.equal(status?.backgroundArgb, 0x80ff0000);
      assert.equal(status?.font, undefined);
      assert.deepEqual(status?.recipients, [PEER]);
      assert.deepEqual(
        (await statusesOf(t, BIA)).map((s) => s.id),
        [textId],
      );
    });

    it('image and video statuses take media as the media sends do', async () => {
      const image = await t.call('POST', '/v1/status/image', {
        image: dataUri(fixture('tiny.png'), 'text/plain'),
        caption: 'New in store',
        contacts: [BIA],
      });
      const { id: imageId } = sent(image, 1);
      t.clock.advance(1000);
      const video = await t.call('POST', '/v1/status/video', {
        video: dataUri(fixture('clip.mp4')),
        contacts: [BIA],
      });
      const { id: videoId } = sent(video, 1);
      const seen = (await statusesOf(t, BIA)).filter((s) => s.id === imageId || s.id === videoId);
      assert.deepEqual(
        seen.map(({ id, kind, text, mimetype, recipients }) => ({ id, kind, text, mimetype, recipients })),
        [
          { id: imageId, kind: 'image', text: 'New in store', mimetype: 'image/png', recipients: [BIA] },
          { id: videoId, kind: 'video', text: undefined, mimetype: 'video/mp4', recipients: [BIA] },
        ],
      );
      assert.deepEqual(JSON.parse((await messageRow(t, imageId))?.content ?? '{}').kind, 'image');
      const notImage = await t.call('POST', '/v1/status/image', {
        image: dataUri(fixture('doc.pdf')),
        contacts: [BIA],
      });
      assert.deepEqual(notImage.body, bad(400, 'image must be JPEG, PNG, GIF or WEBP'));
      const scheme = await t.call('POST', '/v1/status/video', { video: 'ftp://x/clip.mp4' });
      assert.deepEqual(scheme.body, bad(400, 'video must be an https:// URL or a data: URI'));
    });

    it('a contact viewing the status reaches parley as a ReadReceipt; a non-recipient cannot view it', async () => {
      const view = await t.call('POST', '/v1/sandbox/receipt', { id: textId, state: 'read', phone: BIA });
      assert.deepEqual(view.body, { success: true, code: 200, data: { details: 'Receipt read sent' } });
      const receipts = (await storedBodies(t, 'ReadReceipt')).filter((b) =>
        b.event.messageIds.includes(textId),
      );
      assert.equal(receipts.length, 1);
      assert.equal(receipts[0].state, 'Read');
      assert.deepEqual(receipts[0].event.messageSource, {
        chat: STATUS,
        sender: `${BIA}@s.whatsapp.net`,
        isFromMe: false,
        isGroup: false,
      });
      assert.equal((await messageRow(t, textId))?.state, 'read');
      assert.deepEqual((await statusesOf(t, BIA)).find((s) => s.id === textId)?.views, { [BIA]: 'read' });
      const stranger = await t.call('POST', '/v1/sandbox/receipt', {
        id: textId,
        state: 'read',
        phone: '5511955554444',
      });
      assert.deepEqual(stranger.body, bad(422, 'phone 5511955554444 did not receive the status'));
      const unseen = sent(
        await t.call('POST', '/v1/status/text', { body: 'To nobody', contacts: [UNREGISTERED] }),
        1,
      ).id;
      const nobody = await t.call('POST', '/v1/sandbox/receipt', { id: unseen, state: 'read' });
      assert.deepEqual(nobody.body, bad(422, 'the status reached no contact'));
    });

    it('400s name the field', async () => {
      const post = (body: unknown, path = '/v1/status/text') => t.call('POST', path, body);
      const cases: [unknown, string][] = [
        [{ body: 'x', backgroundColor: 'blue' }, 'backgroundColor must be a colour #RRGGBB or #AARRGGBB'],
        [{ body: 'x', backgroundColor: '#12345' }, 'backgroundColor must be a colour #RRGGBB or #AARRGGBB'],
        [{ body: 'x', font: 3 }, 'font must be one of 0, 1, 2, 6, 7, 8, 9, 10'],
        [{ body: 'x', font: 11 }, 'font must be one of 0, 1, 2, 6, 7, 8, 9, 10'],
        [{ body: 'x', contacts: [PEER, PEER] }, 'contacts must be unique'],
        [{ body: 'x', contacts: [OWN] }, `contacts must not include the instance's own number ${OWN}`],
        [
          { body: 'x', contacts: ['+5511'] },
          'contacts[0] must be digits only, international format, no leading +',
        ],
      ];
      for (const [body, message] of cases) {
        const res = await post(body);
        assert.deepEqual(res.body, bad(400, message), JSON.stringify(body));
      }
      assert.deepEqual((await post({ backgroundColor: '#000000' })).body, bad(400, 'body is required'));
      assert.deepEqual(
        (await post({ body: 'x', contacts: [] })).body,
        bad(400, 'contacts must have at least 1 item'),
      );
      assert.deepEqual(
        (await post({ caption: 'x' }, '/v1/status/image')).body,
        bad(400, 'image is required'),
      );
    });

    it('Idempotency-Key: a retry answers the kept answer and posts nothing more', async () => {
      const before = (await statusesOf(t)).length;
      const headers = { 'idempotency-key': 'status-1' };
      const body = { body: 'Once only', contacts: [PEER] };
      const first = await t.call('POST', '/v1/status/text', body, headers);
      sent(first, 1);
      const again = await t.call('POST', '/v1/status/text', body, headers);
      assert.equal(again.status, 200);
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.deepEqual(again.body, first.body);
      assert.equal((await statusesOf(t)).length, before + 1);
    });

    it('Prefer: respond-async queues the status as a job, relayed under its id', async () => {
      const res = await t.call(
        'POST',
        '/v1/status/text',
        { body: 'Later', contacts: [BIA] },
        { prefer: 'respond-async' },
      );
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const { id } = res.body.data;
      assert.match(id, OWN_ID);
      assert.deepEqual(res.body, {
        success: true,
        code: 202,
        data: { details: 'Queued', id, status: 'pending', sendAt: null, recipients: 1 },
      });
      await eventually('the queued status relayed', async () => (await sendJobRow(t, id)).status === 'sent');
      assert.equal((await messageRow(t, id))?.chat, STATUS);
      assert.deepEqual(
        (await statusesOf(t, BIA)).filter((s) => s.id === id).map((s) => s.text),
        ['Later'],
      );
    });

    it('needs scope chat:messages', async () => {
      const key = await t.newKey({ scopes: ['chat:contacts'] });
      const res = await t.call(
        'POST',
        '/v1/status/text',
        { body: 'x', contacts: [PEER] },
        { authorization: `Bearer ${key}` },
      );
      assert.equal(res.status, 403);
      assert.equal(res.body.error.code, 403);
    });
  });
}
