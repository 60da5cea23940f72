import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { appFor, bad, OWN, PEER, storedBodies } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const T0 = Date.parse('2026-01-15T12:00:00.000Z');
const PEER_JID = `${PEER}@s.whatsapp.net`;

for (const dialect of testDialects()) {
  describe(`calls: POST /v1/calls/{id}/reject on the sandbox [${dialect}]`, () => {
    let t: TestApp;
    const ok = (data: unknown) => ({ success: true, code: 200, data });
    /** The stored Call webhook events of the instance, in sequence order. */
    const callEvents = async () => (await storedBodies(t, 'Call')).map((body) => body.event);

    before(async () => {
      t = await appFor(dialect);
    });
    after(() => t.close());

    it('answers 409 before login', async () => {
      const res = await t.call('POST', '/v1/calls/6D3F0A9C2B41E8F07A1C5D92B3E4F60A/reject');
      assert.deepEqual(res.body, bad(409, 'instance is not logged in'));
      await loginSandbox(t, OWN);
      t.clock.set(T0);
    });

    it('a call made with ring: true rings until rejected: Call offer, then rejected (not automatic)', async () => {
      const rang = await t.call('POST', '/v1/sandbox/call', { phone: PEER, ring: true, video: true });
      const id = rang.body.data.id;
      assert.match(id, /^[0-9A-F]{32}$/);
      assert.deepEqual(rang.body, ok({ id, status: 'ringing' }));
      assert.deepEqual(
        (await callEvents()).map((e) => [e.callId, e.status]),
        [[id, 'offer']],
        'no missed event while it rings',
      );
      t.clock.advance(5_000);
      const res = await t.call('POST', `/v1/calls/${id}/reject`);
      const expected = {
        callId: id,
        from: PEER_JID,
        status: 'rejected',
        isVideo: true,
        isGroup: false,
        autoRejected: false,
        timestamp: new Date(T0 + 5_000).toISOString(),
      };
      assert.deepEqual(res.body, ok(expected));
      const events = await callEvents();
      assert.deepEqual(events.at(-1), expected, 'the Call rejected event');
      assert.equal(events.length, 2);

      const again = await t.call('POST', `/v1/calls/${id}/reject`);
      assert.deepEqual(again.body, bad(409, `call ${id} is no longer ringing (rejected)`));
    });

    it('409 for a call that already ended, 404 for an unknown call', async () => {
      const missed = await t.call('POST', '/v1/sandbox/call', { phone: PEER });
      assert.equal(missed.body.data.status, 'missed');
      const ended = await t.call('POST', `/v1/calls/${missed.body.data.id}/reject`);
      assert.deepEqual(ended.body, bad(409, `call ${missed.body.data.id} is no longer ringing (missed)`));
      const unknown = await t.call('POST', '/v1/calls/6D3F0A9C2B41E8F07A1C5D92B3E4F60A/reject');
      assert.deepEqual(unknown.body, bad(404, 'call 6D3F0A9C2B41E8F07A1C5D92B3E4F60A not found'));
    });

    it('with the automatic reject on, ring: true is ignored: the call is rejected at once', async () => {
      await t.call('POST', '/v1/calls/settings', { autoReject: true });
      const res = await t.call('POST', '/v1/sandbox/call', { phone: PEER, ring: true });
      assert.equal(res.body.data.status, 'rejected');
      const again = await t.call('POST', `/v1/calls/${res.body.data.id}/reject`);
      assert.deepEqual(again.body, bad(409, `call ${res.body.data.id} is no longer ringing (rejected)`));
      await t.call('POST', '/v1/calls/settings', { autoReject: false });
    });

    it('validates ring and needs chat:session', async () => {
      assert.deepEqual(
        (await t.call('POST', '/v1/sandbox/call', { phone: PEER, ring: 'yes' })).body,
        bad(400, 'ring must be a boolean'),
      );
      const messagesOnly = await t.newKey({ scopes: ['chat:messages'] });
      const res = await t.call('POST', '/v1/calls/6D3F0A9C2B41E8F07A1C5D92B3E4F60A/reject', undefined, {
        authorization: `Bearer ${messagesOnly}`,
      });
      assert.deepEqual(res.body, bad(403, 'API key lacks required scope chat:session'));
    });
  });
}
