import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { createTestApp, type TestApp } from '../support/app.ts';
import { testDialects } from '../support/store.ts';

const OWN = '5511999990001';
const PEER = '5511999990002';

const bad = (status: number, message: string) => ({ error: { code: status, message } });
const fixture = (name: string) => readFileSync(new URL(`../fixtures/media/${name}`, import.meta.url));
const dataUri = (name: string, mime = 'application/octet-stream') =>
  `data:${mime};base64,${fixture(name).toString('base64')}`;

const VCARD =
  'BEGIN:VCARD\nVERSION:3.0\nN:Souza;Ana;;;\nFN:Ana Souza\nTEL;type=CELL:+5511999990002\nEND:VCARD';

for (const dialect of testDialects()) {
  describe(`gateway form: paths without /v1, x-instance-id (docs/gateway.md, docs/decisions/0021-gateway-form.md) [${dialect}]`, () => {
    let t: TestApp;
    const gw = (method: 'GET' | 'POST', url: string, body?: unknown, headers: Record<string, string> = {}) =>
      t.call(method, url, body, { 'x-instance-id': t.instance.id, ...headers });

    before(async () => {
      t = await createTestApp({
        dialect,
        plan: { plan: 'enterprise', perMinute: 100_000, perDay: 1_000_000 },
      });
    });
    after(() => t.close());

    it('session: status, connect, qr, disconnect through the gateway', async () => {
      assert.deepEqual((await gw('GET', '/session/status')).body, {
        success: true,
        code: 200,
        data: { connected: false, loggedIn: false, instanceId: t.instance.id, env: 'test' },
      });
      const connect = await gw('POST', '/session/connect', { subscribe: ['Message'] });
      assert.deepEqual(connect.body, {
        success: true,
        code: 200,
        data: { details: 'Connected!', events: 'Message', jid: '', webhook: '' },
      });
      const qr = await gw('GET', '/session/qr');
      assert.equal(qr.status, 200);
      assert.match(qr.body.data.qrCode, /^data:image\/png;base64,/);
      const scan = await t.call('POST', `/v1/sandbox/scan?from=${t.instance.id}`, {
        code: qr.body.data.code,
        phone: OWN,
      });
      assert.equal(scan.status, 200);
      assert.equal((await gw('GET', '/session/status')).body.data.loggedIn, true);
      assert.deepEqual((await gw('POST', '/session/disconnect')).body, {
        success: true,
        code: 200,
        data: { details: 'Disconnected' },
      });
      assert.deepEqual((await gw('GET', '/session/status')).body.data, {
        connected: false,
        loggedIn: true,
        jid: `${OWN}.0:1@s.whatsapp.net`,
        instanceId: t.instance.id,
        env: 'test',
      });
      assert.equal((await gw('POST', '/session/connect')).status, 200);
    });

    it('messages: every send kind; text takes message instead of body; from comes from the header', async () => {
      const text = await gw('POST', '/chat/send/text', { phone: PEER, message: 'hello *gateway*' });
      assert.equal(text.status, 200);
      assert.deepEqual(Object.keys(text.body.data).sort(), ['details', 'id', 'timestamp']);
      assert.equal(text.body.data.details, 'Sent');
      const row = await t.services.store.db
        .selectFrom('messages')
        .selectAll()
        .where('id', '=', text.body.data.id)
        .executeTakeFirstOrThrow();
      assert.equal(row.instance_id, t.instance.id);
      assert.equal(row.chat, `${PEER}@s.whatsapp.net`);
      assert.equal(JSON.parse(row.content).text, 'hello *gateway*');

      const sends: [string, Record<string, unknown>, string][] = [
        ['image', { image: dataUri('tiny.png'), caption: 'pic' }, 'image'],
        ['document', { document: dataUri('doc.pdf'), fileName: 'doc.pdf' }, 'document'],
        ['audio', { audio: dataUri('voice.ogg') }, 'audio'],
        ['video', { video: dataUri('clip.mp4') }, 'video'],
        ['location', { latitude: -23.55, longitude: -46.63, name: 'Sé' }, 'location'],
        ['contact', { name: 'Ana Souza', vcard: VCARD }, 'contact'],
        ['sticker', { sticker: dataUri('tiny.webp') }, 'sticker'],
      ];
      for (const [kind, fields, type] of sends) {
        const res = await gw('POST', `/chat/send/${kind}`, { phone: PEER, ...fields });
        assert.equal(res.status, 200, `${kind}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.data.details, 'Sent');
        const stored = await t.services.store.db
          .selectFrom('messages')
          .select(['type', 'instance_id'])
          .where('id', '=', res.body.data.id)
          .executeTakeFirstOrThrow();
        assert.deepEqual(stored, { type, instance_id: t.instance.id }, kind);
      }
    });

    it('messages: the text send validates message with the twin rules, naming message', async () => {
      const send = (body: unknown) => gw('POST', '/chat/send/text', body);
      assert.deepEqual((await send({ phone: PEER })).body, bad(400, 'message is required'));
      assert.deepEqual((await send({ phone: PEER, body: 'hi' })).body, bad(400, 'message is required'));
      assert.deepEqual((await send({ phone: PEER, message: 5 })).body, bad(400, 'message must be a string'));
      assert.deepEqual(
        (await send({ phone: PEER, message: '' })).body,
        bad(400, 'message must not be empty'),
      );
      assert.deepEqual(
        (await send({ phone: PEER, message: 'x'.repeat(65_537) })).body,
        bad(400, 'message must be at most 65536 characters'),
      );
      assert.deepEqual((await send({ message: 'hi' })).body, bad(400, 'phone is required'));
    });

    it('contacts: check, contacts, info and avatar', async () => {
      const check = await gw('POST', '/user/check', { phones: [PEER, '5511999990000'] });
      assert.deepEqual(check.body.data.users, [
        { query: PEER, isInPlatform: true, jid: `${PEER}@s.whatsapp.net`, verifiedName: '' },
        { query: '5511999990000', isInPlatform: false, jid: null, verifiedName: '' },
      ]);
      const contacts = await gw('GET', '/user/contacts');
      assert.equal(contacts.status, 200);
      assert.equal(contacts.body.data[`${PEER}@s.whatsapp.net`].found, true, 'the peer messaged above');
      const info = await gw('GET', `/user/info?phone=${PEER}`);
      assert.equal(info.body.data.users[0].jid, `${PEER}@s.whatsapp.net`);
      const avatar = await gw('GET', `/user/avatar?phone=${PEER}`);
      assert.equal(avatar.status, 200);
      assert.deepEqual(Object.keys(avatar.body.data).sort(), ['id', 'url']);
      assert.deepEqual((await gw('GET', '/user/avatar')).body, bad(400, 'phone is required'));
    });

    it('groups: create, list, info, invitelink', async () => {
      const created = await gw('POST', '/group/create', { name: 'Gateway', participants: [PEER] });
      assert.equal(created.status, 200);
      const jid = created.body.data.jid;
      const list = await gw('GET', '/group/list');
      assert.ok(list.body.data.groups.some((g: any) => g.jid === jid));
      const info = await gw('GET', `/group/info?groupJid=${jid}`);
      assert.equal(info.body.data.name, 'Gateway');
      assert.equal(info.body.data.topic, '');
      const link = await gw('GET', `/group/invitelink?groupJid=${jid}`);
      assert.ok(link.body.data.inviteLink.startsWith(t.config.inviteBaseUrl));
      assert.deepEqual(
        (await gw('GET', '/group/info?groupJid=nope')).body,
        bad(400, 'groupJid must be a group JID: <digits>@g.us or <digits>-<digits>@g.us'),
      );
    });

    it('x-instance-id is required, must be a UUID and must name an addressable instance', async () => {
      for (const [method, url] of [
        ['GET', '/session/status'],
        ['POST', '/chat/send/text'],
        ['GET', '/group/list'],
        ['POST', '/user/check'],
      ] as const) {
        const missing = await t.call(method, url, method === 'POST' ? {} : undefined);
        assert.deepEqual(missing.body, bad(400, 'x-instance-id is required'), url);
      }
      const empty = await t.call('GET', '/session/status', undefined, { 'x-instance-id': '' });
      assert.deepEqual(empty.body, bad(400, 'x-instance-id is required'));
      const phone = await t.call('GET', '/session/status', undefined, { 'x-instance-id': OWN });
      assert.deepEqual(phone.body, bad(400, 'x-instance-id must be an instance UUID'));
      const unknown = await t.call('GET', '/session/status', undefined, {
        'x-instance-id': '00000000-0000-4000-8000-000000000000',
      });
      assert.deepEqual(unknown.body, bad(404, 'instance not found'));
      const otherOrg = await createTestApp({ testStore: t.testStore, clock: t.clock });
      try {
        const foreign = await t.call('GET', '/session/status', undefined, {
          'x-instance-id': otherOrg.instance.id,
        });
        assert.deepEqual(foreign.body, bad(404, 'instance not found'));
      } finally {
        await otherOrg.close();
      }
      const bearerless = await t.app.inject({
        method: 'GET',
        url: '/session/status',
        headers: { 'x-instance-id': t.instance.id },
      });
      assert.equal(bearerless.statusCode, 401, 'auth comes first');
    });

    it('the header is the selector: query and body from are overridden', async () => {
      const second = await t.newInstance('test', 'second');
      const status = await t.call('GET', `/session/status?from=${t.instance.id}`, undefined, {
        'x-instance-id': second.id,
      });
      assert.equal(status.body.data.instanceId, second.id);
      const send = await t.call(
        'POST',
        '/chat/send/text',
        { phone: PEER, message: 'hi', from: t.instance.id },
        { 'x-instance-id': second.id },
      );
      assert.deepEqual(send.body, bad(409, 'instance is not logged in'), 'sent from the header instance');
    });

    it('uses the twin scope and answers 404 under the gateway path for a wrong method', async () => {
      const contactsOnly = await t.newKey({ scopes: ['chat:contacts'] });
      const denied = await gw('GET', '/session/status', undefined, {
        authorization: `Bearer ${contactsOnly}`,
      });
      assert.deepEqual(denied.body, bad(403, 'API key lacks required scope chat:session'));
      const allowed = await gw('GET', '/user/contacts', undefined, {
        authorization: `Bearer ${contactsOnly}`,
      });
      assert.equal(allowed.status, 200);
      const messagesOnly = await t.newKey({ scopes: ['chat:messages'] });
      const group = await gw('GET', '/group/list', undefined, { authorization: `Bearer ${messagesOnly}` });
      assert.deepEqual(group.body, bad(403, 'API key lacks required scope chat:groups'));
      assert.deepEqual(
        (await gw('GET', '/chat/send/text')).body,
        bad(404, 'route GET /chat/send/text not found'),
      );
      assert.deepEqual(
        (await gw('POST', '/session/status')).body,
        bad(404, 'route POST /session/status not found'),
      );
      assert.deepEqual(
        (await gw('GET', '/user/unknown')).body,
        bad(404, 'route GET /user/unknown not found'),
      );
    });

    it('session logout through the gateway', async () => {
      assert.deepEqual((await gw('POST', '/session/logout')).body, {
        success: true,
        code: 200,
        data: { details: 'Logged out' },
      });
      assert.deepEqual((await gw('GET', '/group/list')).body, bad(409, 'instance is not logged in'));
    });

    it('OpenAPI documents every gateway path under tag gateway', async () => {
      const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
      const expected: [string, string][] = [
        ...['text', 'image', 'document', 'audio', 'video', 'location', 'contact', 'sticker'].map(
          (k): [string, string] => [`/chat/send/${k}`, 'post'],
        ),
        ['/user/check', 'post'],
        ['/user/contacts', 'get'],
        ['/user/info', 'get'],
        ['/user/avatar', 'get'],
        ['/session/status', 'get'],
        ['/session/qr', 'get'],
        ['/session/connect', 'post'],
        ['/session/disconnect', 'post'],
        ['/session/logout', 'post'],
        ['/group/list', 'get'],
        ['/group/info', 'get'],
        ['/group/create', 'post'],
        ['/group/invitelink', 'get'],
      ];
      for (const [path, method] of expected) {
        const op = doc.paths[path]?.[method];
        assert.ok(op, `${method} ${path} documented`);
        assert.deepEqual(op.tags, ['gateway']);
        const header = op.parameters.find((p: any) => p.in === 'header' && p.name === 'x-instance-id');
        assert.equal(header?.required, true, path);
        assert.ok(!op.parameters.some((p: any) => p.in === 'query' && p.name === 'from'), path);
      }
      const text = doc.paths['/chat/send/text'].post.requestBody.content['application/json'].schema;
      assert.ok(text.properties.message && !text.properties.body && !text.properties.from);
      assert.ok(text.required.includes('message'));
      assert.ok(doc.tags.some((tag: any) => tag.name === 'gateway'));
      for (const path of [
        '/v1/contacts/check',
        '/v1/contacts/list',
        '/v1/groups/create',
        '/v1/groups/invite-link',
      ]) {
        assert.ok(doc.paths[path], `${path} documented`);
      }
    });
  });
}
