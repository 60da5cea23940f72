/**
 * parley's groups with a live key, end to end against the platform simulator: create, list, info and
 * invite-link through the HTTP API (each field as docs/api.md#groups states it, every user JID a phone JID),
 * the platform's "not an admin" refusal as 403, a text parley sends to a group decrypted by every simulated
 * member (sender keys), a member's group message as a Message webhook, group receipts with the participant
 * both ways, and each groups operation through its gateway twin. Runs on SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import type { Simulator } from '../../sim/simulator.ts';
import { type Receiver, startReceiver } from '../support/https-receiver.ts';
import { testDialects } from '../support/store.ts';
import { bodies } from '../webhooks/support.ts';
import { control, type LiveApp, liveApp, pairLive, startTestSimulator, until } from './support.ts';

/** The simulator's view of a group (GET /control/groups/{jid}). */
interface SimGroup {
  jid: string;
  subject: string;
  creator: string;
  creation: string;
  inviteCode: string;
  participants: { phone: string; lid: string; role: string }[];
}

const shop = '5511999990000';
const ana = '5511988887777';
const bruno = '5511977776666';
const carla = '5511966665555';
const jid = (phone: string) => `${phone}@s.whatsapp.net`;
const member = (phone: string, admin = false) => ({ jid: jid(phone), isAdmin: admin, isSuperAdmin: admin });

for (const dialect of testDialects()) {
  describe(`groups through parley's API against the simulator (${dialect})`, () => {
    let sim: Simulator;
    let receiver: Receiver;
    let app: LiveApp;
    let team: SimGroup;
    let carlas: SimGroup;
    let sentToTeam = '';

    const live = (method: 'GET' | 'POST', url: string, body?: unknown) => app.live(method, url, body);
    const gateway = (method: 'GET' | 'POST', url: string, body?: unknown) =>
      app.t.call(method, url, body, {
        authorization: `Bearer ${app.liveKey}`,
        'x-instance-id': app.instanceId,
      });
    const simGroup = async (groupJid: string) =>
      (await control(sim, 'GET', `/groups/${groupJid}`)).body as SimGroup;
    const inbox = (phone: string, predicate: (e: InboxEntry) => boolean, what: string) =>
      until(what, () => sim.context.accounts.get(phone)?.inbox.find(predicate));
    const webhook = (predicate: (b: any) => boolean, what: string) =>
      until(what, () => bodies(receiver.requests).find(predicate));
    /**
     * The group fields docs/api.md#groups lists for list (`info: false`) or info (`info: true`) of a simulator group.
     */
    const expected = (group: SimGroup, owner: string, participants: unknown[], info: boolean) => ({
      jid: group.jid,
      name: group.subject,
      ...(info ? { topic: '' } : {}),
      ownerJid: jid(owner),
      groupCreated: group.creation,
      ...(info ? { nameSetAt: group.creation, nameSetBy: jid(owner) } : {}),
      isAnnounce: false,
      isLocked: false,
      isEphemeral: false,
      disappearingTimer: 0,
      participants,
    });

    before(async () => {
      sim = await startTestSimulator();
      receiver = await startReceiver();
      app = await liveApp(sim, { dialect });
      for (const [phone, pushName] of [
        [shop, 'Shop'],
        [ana, 'Ana'],
        [bruno, 'Bruno'],
        [carla, 'Carla'],
      ]) {
        assert.equal((await control(sim, 'POST', '/users', { phone, pushName })).status, 201);
      }
      await pairLive(sim, app, shop);
      assert.equal((await live('POST', '/v1/webhook', { webhookUrl: receiver.url })).status, 200);
    });
    after(async () => {
      await app.t.close();
      await receiver.close();
      await sim.close();
    });

    it('create: the Group create fields; the account is owner, admin and super admin', async () => {
      const created = await live('POST', '/v1/groups/create', { name: 'Team', participants: [ana, bruno] });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      team = await simGroup(created.body.data.jid);
      assert.deepEqual(
        team.participants.map((p) => [p.phone, p.role]),
        [
          [shop, 'superadmin'],
          [ana, 'member'],
          [bruno, 'member'],
        ],
      );
      assert.deepEqual(created.body, {
        success: true,
        code: 200,
        data: {
          jid: team.jid,
          name: 'Team',
          ownerJid: jid(shop),
          groupCreated: team.creation,
          participants: [member(shop, true), member(ana), member(bruno)],
        },
      });
    });

    it('list and info: exact Group fields; in a group a user made the account is a plain member', async () => {
      const made = await control(sim, 'POST', '/groups', {
        creator: carla,
        subject: 'Carla news',
        participants: [shop, ana],
      });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      carlas = made.body;
      const teamMembers = [member(shop, true), member(ana), member(bruno)];
      const carlaMembers = [member(carla, true), member(shop), member(ana)];
      const list = await live('GET', '/v1/groups/list');
      assert.equal(list.status, 200, JSON.stringify(list.body));
      assert.deepEqual(
        list.body.data.groups,
        [expected(team, shop, teamMembers, false), expected(carlas, carla, carlaMembers, false)].sort(
          (a, b) => a.jid.localeCompare(b.jid),
        ),
      );
      const info = await live('GET', `/v1/groups/info?groupJid=${team.jid}`);
      assert.deepEqual(info.body, {
        success: true,
        code: 200,
        data: expected(team, shop, teamMembers, true),
      });
      const other = await live('GET', `/v1/groups/info?groupJid=${carlas.jid}`);
      assert.deepEqual(other.body.data, expected(carlas, carla, carlaMembers, true));
      const unknown = await live('GET', '/v1/groups/info?groupJid=120363000000000001@g.us');
      assert.deepEqual(unknown.body, {
        error: { code: 404, message: 'group 120363000000000001@g.us not found' },
      });
    });

    it('invite-link: the simulator’s code for an admin; 403 where the account is not an admin', async () => {
      const link = await live('GET', `/v1/groups/invite-link?groupJid=${team.jid}`);
      assert.deepEqual(link.body, {
        success: true,
        code: 200,
        data: { inviteLink: `https://chat.whatsapp.com/${team.inviteCode}` },
      });
      const refused = await live('GET', `/v1/groups/invite-link?groupJid=${carlas.jid}`);
      assert.deepEqual(refused.body, {
        error: { code: 403, message: 'you must be a group admin to get the invite link' },
      });
      assert.equal(refused.status, 403);
    });

    it('a text to a group: every simulated member decrypts it with parley’s sender key', async () => {
      for (const body of ['Welcome to the team!', 'Second message, sender key only']) {
        const sent = await live('POST', '/v1/messages/send', { phone: team.jid, body });
        assert.equal(sent.status, 200, JSON.stringify(sent.body));
        const id: string = sent.body.data.id;
        sentToTeam ||= id;
        for (const phone of [ana, bruno]) {
          const entry = await inbox(phone, (e) => e.id === id, `the group text at ${phone}`);
          assert.deepEqual(
            { ...entry, timestamp: '' },
            { id, from: shop, fromDevice: 1, timestamp: '', type: 'text', text: body, group: team.jid },
          );
        }
      }
      // A plain member writes too, to a group a user made.
      const plain = await live('POST', '/v1/messages/send', {
        phone: carlas.jid,
        body: 'Thanks for adding us',
      });
      assert.equal(plain.status, 200, JSON.stringify(plain.body));
      for (const phone of [carla, ana]) {
        const entry = await inbox(phone, (e) => e.id === plain.body.data.id, `the text at ${phone}`);
        assert.deepEqual([entry.text, entry.group], ['Thanks for adding us', carlas.jid]);
      }
    });

    it('a member writes to the group: a Message webhook with the group as chat, the member’s phone JID as sender', async () => {
      for (const text of ['Hi all, Bruno here', 'And a second one']) {
        const sent = await control(sim, 'POST', '/messages', {
          from: bruno,
          to: shop,
          groupJid: team.jid,
          text,
        });
        assert.equal(sent.status, 201, JSON.stringify(sent.body));
        assert.deepEqual({ ...sent.body, id: '' }, { id: '', devices: 1, online: 1 });
        const body = await webhook(
          (b) => b.type === 'Message' && b.event.info.id === sent.body.id,
          `the Message webhook for "${text}"`,
        );
        assert.deepEqual(body.event.info.messageSource, {
          chat: team.jid,
          sender: jid(bruno),
          isFromMe: false,
          isGroup: true,
        });
        assert.equal(body.event.info.pushName, 'Bruno');
        assert.equal(body.event.message.conversation, text);
      }
    });

    it('group receipts: a member’s delivery and read reach parley with the participant; parley’s read reaches the member', async () => {
      const delivered = await control(sim, 'POST', '/receipts', {
        from: bruno,
        to: shop,
        ids: [sentToTeam],
        type: 'delivery',
        groupJid: team.jid,
      });
      assert.deepEqual(delivered, { status: 200, body: { sockets: 1 } });
      const delivery = await webhook(
        (b) => b.type === 'ReadReceipt' && b.state === 'Delivered' && b.event.messageIds.includes(sentToTeam),
        'the Delivered ReadReceipt webhook',
      );
      assert.deepEqual(delivery.event.messageSource, {
        chat: team.jid,
        sender: jid(bruno),
        isFromMe: false,
        isGroup: true,
      });
      const receipt = await control(sim, 'POST', '/receipts', {
        from: ana,
        to: shop,
        ids: [sentToTeam],
        type: 'read',
        groupJid: team.jid,
      });
      assert.deepEqual(receipt, { status: 200, body: { sockets: 1 } });
      const read = await webhook(
        (b) => b.type === 'ReadReceipt' && b.state === 'Read' && b.event.messageIds.includes(sentToTeam),
        'the ReadReceipt webhook',
      );
      assert.deepEqual(read.event.messageSource, {
        chat: team.jid,
        sender: jid(ana),
        isFromMe: false,
        isGroup: true,
      });
      const row = await until('the message state read', async () => {
        const r = await app.t.services.store.db
          .selectFrom('messages')
          .select(['state', 'chat', 'is_group'])
          .where('id', '=', sentToTeam)
          .executeTakeFirst();
        return r?.state === 'read' ? r : undefined;
      });
      assert.deepEqual({ ...row }, { state: 'read', chat: team.jid, is_group: 1 });

      const fromBruno = await control(sim, 'POST', '/messages', {
        from: bruno,
        to: shop,
        groupJid: team.jid,
        text: 'Please read me',
      });
      const id: string = fromBruno.body.id;
      await webhook((b) => b.type === 'Message' && b.event.info.id === id, 'the member message');
      const marked = await live('POST', '/v1/messages/read', {
        id: [id],
        chatPhone: team.jid,
        senderPhone: bruno,
      });
      assert.deepEqual(marked.body, { success: true, code: 200, data: { details: 'Marked as read' } });
      const seen = await inbox(
        bruno,
        (e) => e.type === 'receipt' && e.receipt === 'read' && (e.ids ?? []).includes(id),
        'the read receipt at Bruno',
      );
      assert.deepEqual(
        { ...seen, timestamp: '' },
        {
          id,
          from: shop,
          fromDevice: 1,
          type: 'receipt',
          timestamp: '',
          receipt: 'read',
          ids: [id],
          group: team.jid,
        },
      );
    });

    it('gateway twins: POST /group/create, GET /group/list, /group/info, /group/invitelink', async () => {
      const created = await gateway('POST', '/group/create', { name: 'Gateway', participants: [carla] });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const gw = await simGroup(created.body.data.jid);
      const members = [member(shop, true), member(carla)];
      assert.deepEqual(created.body.data, {
        jid: gw.jid,
        name: 'Gateway',
        ownerJid: jid(shop),
        groupCreated: gw.creation,
        participants: members,
      });
      const list = await gateway('GET', '/group/list');
      assert.deepEqual(
        list.body.data.groups.map((g: { jid: string }) => g.jid),
        [team.jid, carlas.jid, gw.jid].sort(),
      );
      assert.deepEqual(
        list.body.data.groups.find((g: { jid: string }) => g.jid === gw.jid),
        expected(gw, shop, members, false),
      );
      const info = await gateway('GET', `/group/info?groupJid=${gw.jid}`);
      assert.deepEqual(info.body.data, expected(gw, shop, members, true));
      const link = await gateway('GET', `/group/invitelink?groupJid=${gw.jid}`);
      assert.deepEqual(link.body.data, { inviteLink: `https://chat.whatsapp.com/${gw.inviteCode}` });
      const refused = await gateway('GET', `/group/invitelink?groupJid=${carlas.jid}`);
      assert.deepEqual(refused.body, {
        error: { code: 403, message: 'you must be a group admin to get the invite link' },
      });
    });
  });
}
