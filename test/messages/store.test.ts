import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RegistrationCache } from '../../src/contacts/registration-cache.ts';
import type { EngineMessage } from '../../src/domain/messages.ts';
import { peerOf } from '../../src/events/message-projection.ts';
import {
  findStoredMessage,
  listChatMessages,
  listChatPeers,
  statesBefore,
} from '../../src/store/messages.ts';
import { manualClock, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { appFor, messageRow, OWN, PEER } from './support.ts';

const jidOf = (phone: string) => `${phone}@s.whatsapp.net`;
const GROUP = '120363000000000042@g.us';

function message(id: string, over: Partial<EngineMessage['source']> = {}, pushName = 'Bea'): EngineMessage {
  return {
    id,
    source: { chat: jidOf(PEER), sender: jidOf(PEER), isFromMe: false, isGroup: false, ...over },
    pushName,
    timestamp: Date.parse('2025-06-01T12:00:00.000Z'),
    content: { kind: 'text', text: `text of ${id}` },
  };
}

for (const dialect of testDialects()) {
  describe(`message store projection (docs/decisions/0017-messages-and-media.md, docs/decisions/0004-sandbox.md) [${dialect}]`, () => {
    let t: TestApp;
    before(async () => {
      t = await appFor(dialect);
    });
    after(() => t.close());
    const record = (event: Parameters<TestApp['services']['recorder']['record']>[1]) =>
      t.services.recorder.record(t.instance.id, event);

    it('stores received messages as delivered, sent ones as sent; a repeated id keeps the first row', async () => {
      t.clock.set(Date.parse('2025-06-01T12:00:05.000Z'));
      await record({ type: 'message', message: message('IN1') });
      await record({
        type: 'message',
        message: message('OUT1', { isFromMe: true, sender: jidOf(OWN) }, 'Me'),
      });
      await record({
        type: 'message',
        message: { ...message('IN1'), content: { kind: 'text', text: 'changed' } },
      });
      const inbound = await findStoredMessage(t.services.store.db, t.instance.id, 'IN1');
      assert.deepEqual(inbound, {
        ...message('IN1'),
        state: 'delivered',
        stateAt: '2025-06-01T12:00:05.000Z',
      });
      assert.equal((await messageRow(t, 'OUT1'))?.state, 'sent');
      assert.equal(await findStoredMessage(t.services.store.db, t.instance.id, 'NOPE'), undefined);
      assert.equal(await findStoredMessage(t.services.store.db, 'other-instance', 'IN1'), undefined);
    });

    it('receipts move states forward only, and only for the named ids', async () => {
      const at = (ms: number) => t.clock.set(Date.parse('2025-06-01T13:00:00.000Z') + ms);
      const source = { chat: jidOf(PEER), sender: jidOf(PEER), isFromMe: false, isGroup: false };
      at(0);
      await record({ type: 'receipt', state: 'read', messageIds: ['OUT1'], source, timestamp: t.clock() });
      const read = await messageRow(t, 'OUT1');
      assert.deepEqual([read?.state, read?.state_at], ['read', Date.parse('2025-06-01T13:00:00.000Z')]);
      at(1000);
      await record({
        type: 'receipt',
        state: 'delivered',
        messageIds: ['OUT1'],
        source,
        timestamp: t.clock(),
      });
      const still = await messageRow(t, 'OUT1');
      assert.deepEqual(
        [still?.state, still?.state_at],
        ['read', Date.parse('2025-06-01T13:00:00.000Z')],
        'never backwards',
      );
      await record({
        type: 'receipt',
        state: 'played',
        messageIds: ['OUT1', 'UNKNOWN'],
        source,
        timestamp: t.clock(),
      });
      assert.equal((await messageRow(t, 'OUT1'))?.state, 'played');
      assert.equal((await messageRow(t, 'IN1'))?.state, 'delivered', 'other messages untouched');
      assert.deepEqual(statesBefore('read'), ['sent', 'delivered']);
      assert.deepEqual(statesBefore('sent'), []);
    });

    it('stores history sync messages and lists a chat oldest first', async () => {
      const older = { ...message('H1'), timestamp: Date.parse('2025-05-01T00:00:00.000Z') };
      await record({
        type: 'history',
        syncType: 'RECENT',
        progress: 100,
        chats: [{ jid: jidOf(PEER), name: 'Bea', messages: [older, message('IN1')] }],
      });
      const chat = await listChatMessages(t.services.store.db, t.instance.id, jidOf(PEER));
      assert.deepEqual(
        chat.map((m) => m.id),
        ['H1', 'IN1', 'OUT1'],
      );
    });

    it('records the people the instance exchanged messages with, and their latest push name', async () => {
      t.clock.set(Date.parse('2025-06-02T00:00:00.000Z'));
      await record({ type: 'message', message: message('IN2', {}, 'Beatriz') });
      await record({
        type: 'message',
        message: message('OUT2', { chat: jidOf('5511999990003'), sender: jidOf(OWN), isFromMe: true }, 'Me'),
      });
      await record({
        type: 'message',
        message: message('G1', { chat: GROUP, sender: jidOf('5511999990004'), isGroup: true }, 'Dora'),
      });
      await record({
        type: 'message',
        message: message('G2', { chat: GROUP, sender: jidOf(OWN), isFromMe: true, isGroup: true }, 'Me'),
      });
      await record({ type: 'message', message: message('S1', { chat: 'status@broadcast' }) });
      const peers = await listChatPeers(t.services.store.db, t.instance.id);
      assert.deepEqual(
        peers.map((p) => [p.jid, p.pushName]),
        [
          [jidOf(PEER), 'Beatriz'],
          [jidOf('5511999990003'), ''],
          [jidOf('5511999990004'), 'Dora'],
        ],
      );
      const bea = peers[0];
      assert.ok(bea && bea.firstAt < bea.lastAt);
      assert.equal(peerOf(message('X', { chat: GROUP, isGroup: true, isFromMe: true })), null);
    });

    it('gives the engine its stored messages through findMessage (replies, receipts)', async () => {
      const row = await messageRow(t, 'IN1');
      assert.ok(row);
      await t.call('POST', '/v1/session/connect');
      await t.call('POST', '/v1/sandbox/scan', { phone: OWN });
      const sent = await t.call('POST', '/v1/messages/send', { phone: PEER, body: 'x' });
      const receipt = await t.call('POST', '/v1/sandbox/receipt', {
        id: sent.body.data.id,
        state: 'delivered',
      });
      assert.equal(receipt.status, 200);
      const received = await t.call('POST', '/v1/sandbox/receipt', { id: 'IN1', state: 'delivered' });
      assert.equal(received.status, 404, 'IN1 is stored but was not sent by the account');
    });
  });
}

describe('registration cache (docs/decisions/0001-envelope-and-error-codes.md)', () => {
  const answer = (phones: string[], registered = true) =>
    phones.map((query) => ({
      query,
      isInPlatform: registered,
      jid: registered ? jidOf(query) : null,
      verifiedName: '',
    }));

  it('answers repeated numbers from the cache until their time runs out (positive and negative TTLs)', async () => {
    const clock = manualClock(0);
    const cache = new RegistrationCache({ positiveTtlMs: 1000, negativeTtlMs: 100, clock });
    const asked: string[][] = [];
    const lookup = (registered: boolean) => async (phones: string[]) => {
      asked.push(phones);
      return answer(phones, registered);
    };
    const first = await cache.check('i1', ['111111111', '111111111'], lookup(true));
    assert.deepEqual(first, answer(['111111111', '111111111']));
    await cache.check('i1', ['111111111'], lookup(true));
    await cache.check('i1', ['222222222'], lookup(false));
    assert.deepEqual(asked, [['111111111'], ['222222222']]);
    clock.advance(150);
    await cache.check('i1', ['111111111', '222222222'], lookup(false));
    assert.deepEqual(asked.at(-1), ['222222222'], 'the negative answer expired first');
    await cache.check('i2', ['111111111'], lookup(true));
    assert.deepEqual(asked.at(-1), ['111111111'], 'per instance');
    cache.invalidate('i1');
    await cache.check('i1', ['111111111'], lookup(true));
    assert.deepEqual(asked.at(-1), ['111111111'], 'invalidated');
  });

  it('keeps at most maxEntries, dropping the least recently used', async () => {
    const cache = new RegistrationCache({ maxEntries: 2 });
    const lookup = async (phones: string[]) => answer(phones);
    await cache.check('i', ['100000001', '100000002'], lookup);
    await cache.check('i', ['100000001'], lookup);
    await cache.check('i', ['100000003'], lookup);
    assert.equal(cache.size, 2);
    let asked: string[] = [];
    await cache.check('i', ['100000001', '100000002'], async (phones) => {
      asked = phones;
      return answer(phones);
    });
    assert.deepEqual(asked, ['100000002'], '100000002 was the least recently used');
  });
});
