/**
 * parley's HTTP API with a live key, end to end against the platform simulator: the live engine (Baileys'
 * own makeWASocket over a real WebSocket) pairs, logs in, exchanges Signal-encrypted messages with simulated
 * users, reports their receipts and chat state as signed webhooks, disconnects, reconnects without a scan and
 * logs out. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import { type Simulator, startSimulator } from '../../sim/simulator.ts';
import type { ApiResponse, TestApp } from '../support/app.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { assertSigned, bodies, createWebhookApp, HMAC_KEY } from '../webhooks/support.ts';

const WAIT_MS = 20_000;

/** Re-checks `check` every 25 ms until it returns a value other than undefined; fails after `ms` naming `what`. */
async function until<T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  ms = WAIT_MS,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.fail(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function control(
  sim: Simulator,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<{ status: number; body: any }> {
  const response = await fetch(`${sim.control}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? null : JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

for (const dialect of testDialects()) {
  describe(`live engine through parley's API against the simulator (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let t: TestApp;
    let liveKey: string;
    let instanceId: string;
    const shop = '5511999990000';
    const ana = '5511988887777';

    const live = async (method: 'GET' | 'POST', url: string, body?: unknown): Promise<ApiResponse> => {
      const separator = url.includes('?') ? '&' : '?';
      return t.call(method, `${url}${separator}from=${instanceId}`, body, {
        authorization: `Bearer ${liveKey}`,
      });
    };
    const status = async () => (await live('GET', '/v1/session/status')).body.data;
    const inbox = (predicate: (e: InboxEntry) => boolean, what: string) =>
      until(what, () => sim.context.accounts.get(ana)?.inbox.find(predicate));
    const webhook = (predicate: (b: any) => boolean, what: string) =>
      until(what, () => {
        const index = bodies(receiver.requests).findIndex(predicate);
        return index < 0
          ? undefined
          : { body: bodies(receiver.requests)[index], request: receiver.requests[index] };
      });

    before(async () => {
      sim = await startSimulator({ log: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }) });
      receiver = await startReceiver();
      t = await createWebhookApp({
        dialect,
        // Status is polled while the engine works: a plan whose limits polling never reaches.
        plan: { plan: 'enterprise', perMinute: 1_000_000, perDay: 1_000_000_000 },
        env: { PLATFORM_URL: sim.url, PLATFORM_ROOT_KEY: sim.rootKey.toString('hex') },
      });
      instanceId = (await t.newInstance('live', 'sim')).id;
      liveKey = await t.newKey({ env: 'live' });
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      await control(sim, 'POST', '/users', { phone: ana, pushName: 'Ana' });
    });
    after(async () => {
      await t.close();
      await receiver.close();
      await sim.close();
    });

    it('connect → QR from a simulator ref → scan → connected, logged in with the account JID', async () => {
      const connect = await live('POST', '/v1/session/connect');
      assert.equal(connect.status, 200, JSON.stringify(connect.body));
      const qr = await live('GET', '/v1/session/qr');
      assert.equal(qr.status, 200, JSON.stringify(qr.body));
      const code: string = qr.body.data.code;
      assert.match(code, /#2@/);
      const scan = await control(sim, 'POST', '/scan', { code, phone: shop });
      assert.equal(scan.status, 200, JSON.stringify(scan.body));
      const state = await until('logged in', async () => {
        const s = await status();
        return s.connected && s.loggedIn ? s : undefined;
      });
      assert.equal(state.jid, `${shop}:1@s.whatsapp.net`);
      const account = await control(sim, 'GET', `/accounts/${shop}`);
      assert.deepEqual(account.body.devices, [
        { id: 0, linked: true, sockets: 0 },
        { id: 1, linked: true, sockets: 1 },
      ]);
      assert.equal((await live('POST', '/v1/session/hmac/config', { hmacKey: HMAC_KEY })).status, 200);
      assert.equal((await live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
    });

    it('a user writes: a signed Message webhook with phone JIDs, pushName and ISO time; parley replies, the user decrypts it', async () => {
      const sent = await control(sim, 'POST', '/messages', {
        from: ana,
        to: shop,
        text: 'Is my order ready?',
      });
      assert.equal(sent.status, 201);
      const { body, request } = await webhook(
        (b) => b.type === 'Message' && b.event.info.id === sent.body.id,
        'the Message webhook',
      );
      assert.ok(request);
      assertSigned(request);
      assert.deepEqual(body.event.info.messageSource, {
        chat: `${ana}@s.whatsapp.net`,
        sender: `${ana}@s.whatsapp.net`,
        isFromMe: false,
        isGroup: false,
      });
      assert.equal(body.event.info.pushName, 'Ana');
      assert.match(body.event.info.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$/);
      assert.equal(body.event.message.conversation, 'Is my order ready?');

      const reply = await live('POST', '/v1/messages/send', {
        phone: ana,
        body: 'Yes, it ships today.',
        id: sent.body.id,
      });
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      const entry = await inbox((e) => e.id === reply.body.data.id, 'the reply in the inbox');
      assert.equal(entry.text, 'Yes, it ships today.');
      assert.equal(entry.quotedId, sent.body.id);
      assert.equal(entry.from, shop);
    });

    it('react (received and own) and mark read reach the user; its receipts and chat state come back as webhooks', async () => {
      const sent = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'Thanks!' });
      await webhook((b) => b.type === 'Message' && b.event.info.id === sent.body.id, 'the Message webhook');
      const react = await live('POST', '/v1/messages/react', { phone: ana, id: sent.body.id, body: '👍' });
      assert.equal(react.status, 200, JSON.stringify(react.body));
      assert.deepEqual(
        (await inbox((e) => e.type === 'reaction' && e.reaction?.id === sent.body.id, 'the reaction'))
          .reaction,
        {
          id: sent.body.id,
          text: '👍',
        },
      );
      const own = await live('POST', '/v1/messages/send', { phone: ana, body: 'One more thing' });
      const ownId: string = own.body.data.id;
      await inbox((e) => e.id === ownId, 'the own message');
      assert.equal(
        (await live('POST', '/v1/messages/react', { phone: ana, id: `me:${ownId}`, body: '❤️' })).status,
        200,
      );
      await inbox(
        (e) => e.type === 'reaction' && e.reaction?.id === ownId,
        'the reaction to the own message',
      );

      const read = await live('POST', '/v1/messages/read', { id: [sent.body.id], chatPhone: ana });
      assert.equal(read.status, 200, JSON.stringify(read.body));
      const receipt = await inbox(
        (e) => e.type === 'receipt' && e.receipt === 'read' && (e.ids ?? []).includes(sent.body.id),
        'the read receipt',
      );
      assert.equal(receipt.from, shop);

      assert.equal(
        (await control(sim, 'POST', '/receipts', { from: ana, to: shop, ids: [ownId], type: 'read' })).status,
        200,
      );
      const readReceipt = await webhook(
        (b) => b.type === 'ReadReceipt' && b.event.messageIds.includes(ownId),
        'ReadReceipt',
      );
      assert.equal(readReceipt.body.state, 'Read');
      assert.equal(
        (await control(sim, 'POST', '/presence', { from: ana, to: shop, state: 'recording' })).status,
        200,
      );
      const presence = await webhook((b) => b.type === 'ChatPresence', 'ChatPresence');
      assert.equal(presence.body.event.state, 'composing');
      assert.equal(presence.body.event.media, 'audio');
    });

    it('disconnect keeps the session (false, true); connect again logs in without a scan and messages flow', async () => {
      assert.equal((await live('POST', '/v1/session/disconnect')).status, 200);
      const down = await status();
      assert.deepEqual([down.connected, down.loggedIn], [false, true]);
      await until('the socket closed at the simulator', async () => {
        const account = await control(sim, 'GET', `/accounts/${shop}`);
        return account.body.devices[1].sockets === 0 ? true : undefined;
      });
      const sent = await control(sim, 'POST', '/messages', { from: ana, to: shop, text: 'Are you there?' });
      assert.equal(sent.body.online, 0);
      assert.equal((await live('POST', '/v1/session/connect')).status, 200);
      await until('logged in again', async () => {
        const s = await status();
        return s.connected && s.loggedIn ? true : undefined;
      });
      await webhook(
        (b) => b.type === 'Message' && b.event.info.id === sent.body.id,
        'the offline message as a webhook',
      );
    });

    it('logout: (false, false) and the simulator sees the device removed', async () => {
      assert.equal((await live('POST', '/v1/session/logout')).status, 200);
      const s = await status();
      assert.deepEqual([s.connected, s.loggedIn], [false, false]);
      await until('the device unlinked', async () => {
        const account = await control(sim, 'GET', `/accounts/${shop}`);
        return account.body.devices[1].linked === false ? true : undefined;
      });
    });
  });
}
