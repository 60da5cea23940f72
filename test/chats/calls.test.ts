import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appFor, bad, OWN, PEER, storedBodies, UNREGISTERED } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const T0 = Date.parse('2026-01-15T12:00:00.000Z');
const PEER_JID = `${PEER}@s.whatsapp.net`;
const SORRY = "Sorry, we can't take calls. Please send a message.";

for (const dialect of testDialects()) {
  describe(`calls: Call events and automatic reject (POST /v1/calls/settings, /v1/sandbox/call) [${dialect}]`, () => {
    let t: TestApp;
    const ok = (data: unknown) => ({ success: true, code: 200, data });
    /** The stored Call webhook bodies of the instance, in sequence order. */
    const callEvents = async () => storedBodies(t, 'Call');

    before(async () => {
      t = await appFor(dialect);
    });
    after(() => t.close());

    it('answers 409 before login, and the settings default to calls ringing', async () => {
      const call = await t.call('POST', '/v1/sandbox/call', { phone: PEER });
      assert.deepEqual(call.body, bad(409, 'instance is not logged in'));
      const settings = await t.call('GET', '/v1/calls/settings');
      assert.deepEqual(settings.body, ok({ autoReject: false, message: null }));
      await loginSandbox(t, OWN);
      t.clock.set(T0);
    });

    it('a call nobody answers: Call offer then missed, with the caller, the id and voice', async () => {
      const res = await t.call('POST', '/v1/sandbox/call', { phone: PEER });
      assert.equal(res.status, 200);
      const id = res.body.data.id;
      assert.match(id, /^[0-9A-F]{32}$/);
      assert.deepEqual(res.body, ok({ id, status: 'missed' }));
      const events = await callEvents();
      const base = { callId: id, from: PEER_JID, isVideo: false, isGroup: false, autoRejected: false };
      const timestamp = new Date(T0).toISOString();
      assert.deepEqual(
        events.map(({ sequence: _s, ...rest }) => rest),
        [
          { type: 'Call', event: { ...base, status: 'offer', timestamp }, instanceId: t.instance.id },
          { type: 'Call', event: { ...base, status: 'missed', timestamp }, instanceId: t.instance.id },
        ],
      );
      assert.equal(events[1].sequence, events[0].sequence + 1);
    });

    it('stores the automatic reject with its message, and validates the settings', async () => {
      const set = await t.call('POST', '/v1/calls/settings', { autoReject: true, message: SORRY });
      assert.deepEqual(set.body, ok({ autoReject: true, message: SORRY }));
      assert.deepEqual(
        (await t.call('GET', '/v1/calls/settings')).body,
        ok({ autoReject: true, message: SORRY }),
      );
      const row = await t.services.store.db
        .selectFrom('call_settings')
        .select(['reject', 'message'])
        .where('instance_id', '=', t.instance.id)
        .executeTakeFirst();
      assert.deepEqual(row, { reject: 1, message: SORRY });
      const post = (body: unknown) => t.call('POST', '/v1/calls/settings', body);
      assert.deepEqual((await post({ message: 'x' })).body, bad(400, 'autoReject is required'));
      assert.deepEqual(
        (await post({ autoReject: false, message: 'x' })).body,
        bad(400, 'message needs autoReject: true (it is sent only after an automatic reject)'),
      );
      assert.deepEqual(
        (await post({ autoReject: true, message: 'x'.repeat(65_537) })).status,
        400,
        'a message over 65,536 characters',
      );
      assert.deepEqual(
        (await t.call('GET', '/v1/calls/settings')).body,
        ok({ autoReject: true, message: SORRY }),
        'refused changes keep the settings',
      );
    });

    it('with the automatic reject on: offer, rejected (autoRejected) and the message sent to the caller', async () => {
      const before = (await callEvents()).length;
      t.clock.advance(60_000);
      const res = await t.call('POST', '/v1/sandbox/call', { phone: PEER, video: true });
      assert.deepEqual(res.body, ok({ id: res.body.data.id, status: 'rejected' }));
      const events = (await callEvents())
        .slice(before)
        .map((e) => [e.event.status, e.event.isVideo, e.event.autoRejected]);
      assert.deepEqual(events, [
        ['offer', true, false],
        ['rejected', true, true],
      ]);
      const history = await t.call('GET', `/v1/chats/${PEER}/messages?limit=1`);
      const [sent] = history.body.data.messages;
      assert.equal(sent.fromMe, true);
      assert.deepEqual(sent.message, { conversation: SORRY });
      assert.equal(sent.timestamp, new Date(t.clock()).toISOString());
      assert.equal(sent.state, 'sent');
    });

    it('without a message only rejects; turning it off lets calls ring again', async () => {
      await t.call('POST', '/v1/calls/settings', { autoReject: true, message: '' });
      assert.deepEqual(
        (await t.call('GET', '/v1/calls/settings')).body,
        ok({ autoReject: true, message: null }),
      );
      const count = async () =>
        Number(
          (
            await t.services.store.db
              .selectFrom('messages')
              .select((eb) => eb.fn.countAll().as('n'))
              .where('instance_id', '=', t.instance.id)
              .executeTakeFirstOrThrow()
          ).n,
        );
      const messages = await count();
      const rejected = await t.call('POST', '/v1/sandbox/call', { phone: PEER });
      assert.equal(rejected.body.data.status, 'rejected');
      assert.equal(await count(), messages, 'no message sent');
      await t.call('POST', '/v1/calls/settings', { autoReject: false });
      const missed = await t.call('POST', '/v1/sandbox/call', { phone: PEER });
      assert.equal(missed.body.data.status, 'missed');
    });

    it('validates the caller; settings need chat:session', async () => {
      assert.deepEqual(
        (await t.call('POST', '/v1/sandbox/call', { phone: UNREGISTERED })).body,
        bad(422, `phone ${UNREGISTERED} is not registered on the platform`),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/sandbox/call', { phone: OWN })).body,
        bad(400, 'phone must be another user than this instance'),
      );
      assert.deepEqual(
        (await t.call('POST', '/v1/sandbox/call', { phone: '+55' })).body,
        bad(400, 'phone must be digits only, international format, no leading +'),
      );
      const messagesOnly = await t.newKey({ scopes: ['chat:messages'] });
      for (const [method, path] of [
        ['GET', '/v1/calls/settings'],
        ['POST', '/v1/calls/settings'],
      ] as const) {
        const res = await t.call(method, path, method === 'POST' ? { autoReject: true } : undefined, {
          authorization: `Bearer ${messagesOnly}`,
        });
        assert.deepEqual(res.body, bad(403, 'API key lacks required scope chat:session'), path);
      }
    });

    it("a blocked user's call never reaches the account: no Call event, no reject nor its message", async () => {
      const events = (await callEvents()).length;
      const messages = async () =>
        (
          await t.services.store.db
            .selectFrom('messages')
            .select(['id'])
            .where('instance_id', '=', t.instance.id)
            .execute()
        ).length;
      const stored = await messages();
      assert.deepEqual(
        (await t.call('POST', '/v1/contacts/block', { phone: PEER })).body,
        ok({ phones: [PEER] }),
      );
      await t.call('POST', '/v1/calls/settings', { autoReject: true, message: SORRY });
      // docs/api.md (Blocklist): a blocked user's calls no longer reach the account, on the sandbox too.
      for (const input of [{ phone: PEER }, { phone: PEER, ring: true, video: true }]) {
        const res = await t.call('POST', '/v1/sandbox/call', input);
        assert.equal(res.status, 200, JSON.stringify(res.body));
        const id: string = res.body.data.id;
        assert.deepEqual(res.body, ok({ id, status: 'missed' }), JSON.stringify(input));
        const reject = await t.call('POST', `/v1/calls/${id}/reject`);
        assert.deepEqual(reject.body, bad(404, `call ${id} not found`), 'it never rang');
      }
      assert.equal((await callEvents()).length, events, 'no Call event');
      assert.equal(await messages(), stored, 'no reject message sent to the blocked user');

      await t.call('POST', '/v1/contacts/unblock', { phone: PEER });
      const unblocked = await t.call('POST', '/v1/sandbox/call', { phone: PEER });
      assert.equal(unblocked.body.data.status, 'rejected', 'an unblocked user reaches it again');
      assert.equal((await callEvents()).length, events + 2);
    });
  });
}
