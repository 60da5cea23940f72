/**
 * Contacts and the session through parley's HTTP API with a live key, against the platform simulator, in both
 * forms: `/v1` and the signed gateway form (docs/gateway.md). Contact checks answer the check entry of
 * docs/api.md#contacts for registered, unregistered and verified business users (the simulator's usync `contact` and
 * `business` answers); info carries the about text, picture id and verified name; the avatar is the simulator's
 * `w:profile:picture` answer; the list holds the users who wrote, with the business name their messages carry.
 * Session status, QR code, connect, disconnect and logout, and a text send, go through the gateway. Runs on
 * SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { HMAC_KEY } from '../webhooks/support.ts';
import { gatewayClient, waitForWebhook } from './observe.ts';
import { control, type LiveApp, liveApp, startTestSimulator, until, waitForStatus } from './support.ts';

for (const dialect of testDialects()) {
  describe(`live engine: contacts and the session, /v1 and gateway form (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    let gateway: ReturnType<typeof gatewayClient>;
    const shop = '5531999990000';
    const ana = '5531988887777';
    const acme = '5531977776666';
    const ghost = '5531966665555';
    const nobody = '5531955554444';
    const avatarUrl = 'https://pps.sim.example/v/t61/ana.jpg';
    let avatarId = '';

    const ok = (data: unknown) => ({ success: true, code: 200, data });

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      gateway = gatewayClient(app, HMAC_KEY);
      await control(sim, 'POST', '/users', { phone: shop, pushName: 'Shop' });
      const created = await control(sim, 'POST', '/users', {
        phone: ana,
        pushName: 'Ana',
        avatarUrl,
        about: 'Available for orders',
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      assert.match(created.body.avatar.id, /^[0-9]+$/);
      assert.equal(created.body.avatar.url, avatarUrl);
      assert.equal(created.body.about, 'Available for orders');
      avatarId = created.body.avatar.id;
      const business = await control(sim, 'POST', '/users', {
        phone: acme,
        pushName: 'Acme',
        verifiedName: 'Acme Ltd',
      });
      assert.equal(business.body.verifiedName, 'Acme Ltd');
      await control(sim, 'POST', '/users', { phone: ghost, registered: false });
      assert.equal((await app.live('POST', '/v1/session/hmac/config', { hmacKey: HMAC_KEY })).status, 200);
      assert.equal((await app.live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it('gateway: connect, QR code, scan, status', async () => {
      assert.deepEqual((await gateway('GET', '/session/status')).body, {
        ...ok({ connected: false, loggedIn: false, instanceId: app.instanceId, env: 'live' }),
      });
      const connect = await gateway('POST', '/session/connect', { subscribe: ['Message', 'HistorySync'] });
      assert.deepEqual(
        connect.body,
        ok({ details: 'Connected!', events: 'Message,HistorySync', jid: '', webhook: receiver.url }),
      );
      const qr = await gateway('GET', '/session/qr');
      assert.equal(qr.status, 200, JSON.stringify(qr.body));
      assert.match(qr.body.data.qrCode, /^data:image\/png;base64,/);
      const scan = await control(sim, 'POST', '/scan', { code: qr.body.data.code, phone: shop });
      assert.equal(scan.status, 200, JSON.stringify(scan.body));
      await waitForStatus(app, true, true);
      assert.deepEqual(
        (await gateway('GET', '/session/status')).body,
        ok({
          connected: true,
          loggedIn: true,
          jid: `${shop}:1@s.whatsapp.net`,
          instanceId: app.instanceId,
          env: 'live',
        }),
      );
    });

    it('check: registered, not registered, verified business and unknown numbers, one entry each in order', async () => {
      const expected = ok({
        users: [
          { query: ana, isInPlatform: true, jid: `${ana}@s.whatsapp.net`, verifiedName: '' },
          { query: ghost, isInPlatform: false, jid: null, verifiedName: '' },
          { query: acme, isInPlatform: true, jid: `${acme}@s.whatsapp.net`, verifiedName: 'Acme Ltd' },
          { query: nobody, isInPlatform: false, jid: null, verifiedName: '' },
        ],
      });
      const phones = [ana, ghost, acme, nobody];
      const v1 = await app.live('POST', '/v1/contacts/check', { phones });
      assert.deepEqual(v1.body, expected);
      assert.deepEqual((await gateway('POST', '/user/check', { phones })).body, expected);
    });

    it('info and avatar: about text, picture id and verified name; the picture URL; 404 for a user without one', async () => {
      const expected = ok({
        users: [
          {
            query: ana,
            jid: `${ana}@s.whatsapp.net`,
            status: 'Available for orders',
            pictureId: avatarId,
            verifiedName: '',
          },
          { query: acme, jid: `${acme}@s.whatsapp.net`, status: '', pictureId: '', verifiedName: 'Acme Ltd' },
          { query: ghost, jid: null, status: '', pictureId: '', verifiedName: '' },
        ],
      });
      const phones = `${ana},${acme},${ghost}`;
      assert.deepEqual((await app.live('GET', `/v1/contacts/info?phone=${phones}`)).body, expected);
      assert.deepEqual((await gateway('GET', `/user/info?phone=${phones}`)).body, expected);

      const avatar = ok({ url: avatarUrl, id: avatarId });
      assert.deepEqual((await app.live('GET', `/v1/contacts/avatar?phone=${ana}`)).body, avatar);
      assert.deepEqual((await gateway('GET', `/user/avatar?phone=${ana}`)).body, avatar);
      const none = await app.live('GET', `/v1/contacts/avatar?phone=${acme}`);
      assert.deepEqual(
        [none.status, none.body],
        [404, { error: { code: 404, message: `user ${acme} has no profile picture` } }],
      );
    });

    it('list: users who wrote, with their push names and the business name their messages carry', async () => {
      for (const [from, text] of [
        [ana, 'Hi from Ana'],
        [acme, 'Invoice attached soon'],
      ] as const) {
        const sent = await control(sim, 'POST', '/messages', { from, to: shop, text });
        assert.equal(sent.status, 201, JSON.stringify(sent.body));
        await waitForWebhook(receiver, (b) => b.type === 'Message' && b.event.info.id === sent.body.id, text);
      }
      const expected = ok({
        [`${acme}@s.whatsapp.net`]: {
          businessName: 'Acme Ltd',
          firstName: '',
          fullName: '',
          pushName: 'Acme',
          found: true,
        },
        [`${ana}@s.whatsapp.net`]: {
          businessName: '',
          firstName: '',
          fullName: '',
          pushName: 'Ana',
          found: true,
        },
      });
      const list = await until('both users listed with the business name', async () => {
        const response = await app.live('GET', '/v1/contacts/list');
        return response.body.data?.[`${acme}@s.whatsapp.net`]?.businessName ? response : undefined;
      });
      assert.deepEqual(list.body, expected);
      assert.deepEqual((await gateway('GET', '/user/contacts')).body, expected);
    });

    it('gateway: a text send reaches the user, who decrypts it', async () => {
      const sent = await gateway('POST', '/chat/send/text', {
        phone: ana,
        message: 'Your order ships *today*',
      });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
      assert.equal(sent.body.data.details, 'Sent');
      const entry = await until('the text in the inbox', () =>
        sim.context.accounts.get(ana)?.inbox.find((e) => e.id === sent.body.data.id),
      );
      assert.deepEqual([entry.type, entry.text, entry.from], ['text', 'Your order ships *today*', shop]);
    });

    it('gateway: disconnect keeps the session, connect resumes without a scan, logout unlinks the device', async () => {
      assert.deepEqual((await gateway('POST', '/session/disconnect')).body, ok({ details: 'Disconnected' }));
      const down = (await gateway('GET', '/session/status')).body.data;
      assert.deepEqual([down.connected, down.loggedIn], [false, true]);
      await until('the socket closed at the simulator', async () => {
        const account = await control(sim, 'GET', `/accounts/${shop}`);
        return account.body.devices[1].sockets === 0 ? true : undefined;
      });
      const connect = await gateway('POST', '/session/connect');
      assert.equal(connect.status, 200, JSON.stringify(connect.body));
      await waitForStatus(app, true, true);
      assert.deepEqual((await gateway('POST', '/session/logout')).body, ok({ details: 'Logged out' }));
      const out = (await gateway('GET', '/session/status')).body.data;
      assert.deepEqual([out.connected, out.loggedIn], [false, false]);
      await until('the device unlinked at the simulator', async () => {
        const account = await control(sim, 'GET', `/accounts/${shop}`);
        return account.body.devices[1].linked === false ? true : undefined;
      });
    });
  });
}
