/**
 * The simulator's groups with a real Baileys 7 client: the `w:g2` queries (create, participating, metadata,
 * invite code; the platform's errors for a non-admin, a non-member and an unknown group), and group messages
 * both ways with Signal sender keys — Baileys' skmsg decrypted by every simulated member, a member's skmsg
 * decrypted by Baileys after the member distributed its sender key — plus group receipts with `participant`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { GroupMetadata, WAMessage } from 'baileys';
import type { InboxEntry } from '../../sim/model/inbox.ts';
import type { DeviceStanza } from '../../sim/server/session.ts';
import { type OutgoingMessage, parseOutgoingMessage } from '../../sim/signal/index.ts';
import type { Simulator } from '../../sim/simulator.ts';
import {
  type Client,
  control,
  endClient,
  pairClient,
  startTrustedSimulator,
  until,
  waitForEvent,
} from './support.ts';

const account = '4930100000001';
const bruno = '4930100000002';
const carla = '4930100000003';
const outsider = '4930100000004';

/** The platform's error code in what Baileys threw: `data` (assertNodeErrorFree) or the Boom status. */
function boomStatus(error: unknown): number | undefined {
  const boom = error as { data?: unknown; output?: { statusCode?: number } };
  return typeof boom.data === 'number' ? boom.data : boom.output?.statusCode;
}

describe('simulator: groups with a real Baileys client', () => {
  let sim: Simulator;
  let client: Client;
  const lid = (phone: string) => `${sim.context.accounts.get(phone)?.lid}@lid`;
  const inbox = (phone: string, predicate: (e: InboxEntry) => boolean, what: string) =>
    until(what, () => sim.context.accounts.get(phone)?.inbox.find(predicate));

  before(async () => {
    sim = await startTrustedSimulator();
    for (const [phone, pushName] of [
      [account, 'Shop'],
      [bruno, 'Bruno'],
      [carla, 'Carla'],
      [outsider, 'Olga'],
    ]) {
      await control(sim, 'POST', '/users', { phone, pushName });
    }
    client = await pairClient(sim, account);
  });
  after(async () => {
    await endClient(client);
    await sim.close();
  });

  let group: GroupMetadata;

  it('groupCreate: a LID-addressed group, the creator super admin, members with their phone numbers', async () => {
    group = await client.sock.groupCreate('Team', [`${bruno}@s.whatsapp.net`, `${carla}@s.whatsapp.net`]);
    assert.match(group.id, /^120363[0-9]{13}@g\.us$/);
    assert.equal(group.subject, 'Team');
    assert.equal(group.addressingMode, 'lid');
    assert.equal(group.owner, lid(account));
    assert.equal(group.ownerPn, `${account}@s.whatsapp.net`);
    assert.equal(group.subjectOwner, lid(account));
    assert.equal(group.size, 3);
    assert.ok(Math.abs((group.creation ?? 0) - Date.now() / 1000) < 60);
    assert.deepEqual(
      group.participants.map((p) => ({ id: p.id, phoneNumber: p.phoneNumber, admin: p.admin })),
      [
        { id: lid(account), phoneNumber: `${account}@s.whatsapp.net`, admin: 'superadmin' },
        { id: lid(bruno), phoneNumber: `${bruno}@s.whatsapp.net`, admin: null },
        { id: lid(carla), phoneNumber: `${carla}@s.whatsapp.net`, admin: null },
      ],
    );
  });

  it('participating, metadata, invite code and its revocation answer as Baileys parses them', async () => {
    const all = await client.sock.groupFetchAllParticipating();
    assert.deepEqual(Object.keys(all), [group.id]);
    assert.deepEqual(all[group.id]?.participants, group.participants);
    const meta = await client.sock.groupMetadata(group.id);
    assert.deepEqual(meta, group);
    const code = await client.sock.groupInviteCode(group.id);
    assert.match(code ?? '', /^[A-Za-z0-9]{22}$/);
    const view = (await control(sim, 'GET', `/groups/${group.id}`)).body as { inviteCode: string };
    assert.equal(code, view.inviteCode);
    const revoked = await client.sock.groupRevokeInvite(group.id);
    assert.match(revoked ?? '', /^[A-Za-z0-9]{22}$/);
    assert.notEqual(revoked, code);
    assert.equal(await client.sock.groupInviteCode(group.id), revoked);
  });

  it('a group made by a user: the account is a plain member; invite code is 401, unknown group 404', async () => {
    const announced = waitForEvent(client, 'groups.upsert', (metas) => metas.length > 0, 'the w:gp2 create');
    const made = await control(sim, 'POST', '/groups', {
      creator: carla,
      subject: 'Carla’s',
      participants: [account, bruno],
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const body = made.body as { jid: string; participants: unknown[] };
    assert.deepEqual(body.participants, [
      { phone: carla, lid: sim.context.accounts.get(carla)?.lid, role: 'superadmin' },
      { phone: account, lid: sim.context.accounts.get(account)?.lid, role: 'member' },
      { phone: bruno, lid: sim.context.accounts.get(bruno)?.lid, role: 'member' },
    ]);
    const [upserted] = await announced;
    assert.equal(upserted?.id, body.jid);
    assert.equal(upserted?.subject, 'Carla’s');
    assert.equal(upserted?.author, lid(carla));
    assert.equal(upserted?.authorPn, `${carla}@s.whatsapp.net`);
    const meta = await client.sock.groupMetadata(body.jid);
    assert.deepEqual(meta.participants, upserted?.participants);
    assert.equal(meta.ownerPn, `${carla}@s.whatsapp.net`);
    assert.equal(meta.participants.find((p) => p.id === lid(account))?.admin, null);
    const all = await client.sock.groupFetchAllParticipating();
    assert.deepEqual(Object.keys(all).sort(), [group.id, body.jid].sort());
    await assert.rejects(client.sock.groupInviteCode(body.jid), (e) => boomStatus(e) === 401);
    await assert.rejects(client.sock.groupMetadata('120363999999999999@g.us'), (e) => boomStatus(e) === 404);
    const alone = await control(sim, 'POST', '/groups', {
      creator: outsider,
      subject: 'Private',
      participants: [bruno],
    });
    const aloneJid = (alone.body as { jid: string }).jid;
    const error = (status: number, message: string) => ({
      status,
      body: { error: { code: status, message } },
    });
    assert.deepEqual(
      await control(sim, 'POST', '/groups', {
        creator: carla,
        subject: 'x',
        participants: ['4930100000099'],
      }),
      error(404, 'participants.0: no simulated user with phone 4930100000099'),
    );
    await control(sim, 'POST', '/users', { phone: '4930100000098', registered: false });
    assert.deepEqual(
      await control(sim, 'POST', '/groups', {
        creator: carla,
        subject: 'x',
        participants: [bruno, '4930100000098'],
      }),
      error(400, 'participants.1: 4930100000098 is not registered'),
    );
    assert.deepEqual(
      await control(sim, 'POST', '/groups', { creator: carla, subject: '', participants: [bruno] }),
      error(400, 'subject: must NOT have fewer than 1 characters'),
    );
    assert.deepEqual(
      await control(sim, 'GET', '/groups/120363999999999999@g.us'),
      error(404, 'jid: no simulated group 120363999999999999@g.us'),
    );
    await assert.rejects(client.sock.groupMetadata(aloneJid), (e) => boomStatus(e) === 401);
  });

  let firstSent = '';

  it('Baileys sends to the group: every member phone decrypts the skmsg with the distributed sender key', async () => {
    const stanzas: OutgoingMessage[] = [];
    const onStanza = ({ node }: DeviceStanza) => {
      if (node.tag === 'message' && node.attrs.to === group.id) stanzas.push(parseOutgoingMessage(node));
    };
    sim.context.events.on('stanza', onStanza);
    for (const text of ['hello team', 'second, sender key only']) {
      const sent = await client.sock.sendMessage(group.id, { text });
      const id = sent?.key.id ?? '';
      firstSent ||= id;
      for (const member of [bruno, carla]) {
        const entry = await inbox(member, (e) => e.id === id, `${text} at ${member}`);
        assert.deepEqual(
          { ...entry, timestamp: '' },
          { id, from: account, fromDevice: 1, timestamp: '', type: 'text', text, group: group.id },
        );
      }
    }
    sim.context.events.off('stanza', onStanza);
    // The first stanza hands the sender key to every member phone, the account's own phone, and the sending
    // device itself (Baileys' extractDeviceJids compares the own LID JID with a user part, so it keeps its own
    // device in a LID group; the server drops that copy); the second carries the skmsg alone.
    assert.deepEqual(
      stanzas.map((m) => m.encs.map((e) => [e.jid, e.type === 'skmsg' ? 'skmsg' : 'pairwise']).sort()),
      [
        [
          [group.id, 'skmsg'],
          [lid(account), 'pairwise'],
          [lid(account).replace('@', ':1@'), 'pairwise'],
          [lid(bruno), 'pairwise'],
          [lid(carla), 'pairwise'],
        ].sort(),
        [[group.id, 'skmsg']],
      ],
    );
    assert.equal(stanzas[0]?.attrs.addressing_mode, 'lid');
  });

  it('a member sends to the group: Baileys gets the sender key, then decrypts the skmsg', async () => {
    for (const text of ['hi from Bruno', 'again from Bruno']) {
      const received = waitForEvent(
        client,
        'messages.upsert',
        (u) => u.messages.some((m) => m.message?.conversation === text),
        text,
      );
      const sent = await control(sim, 'POST', '/messages', {
        from: bruno,
        to: account,
        groupJid: group.id,
        text,
      });
      assert.equal(sent.status, 201, JSON.stringify(sent.body));
      assert.deepEqual({ ...(sent.body as object), id: '' }, { id: '', devices: 1, online: 1 });
      const message = (await received).messages.find((m) => m.message?.conversation === text) as WAMessage;
      assert.equal(message.key.remoteJid, group.id);
      assert.equal(message.key.participant, lid(bruno));
      assert.equal(message.key.participantAlt, `${bruno}@s.whatsapp.net`);
      assert.equal(message.key.fromMe, false);
      assert.equal(message.pushName, 'Bruno');
    }
    const notMember = await control(sim, 'POST', '/messages', {
      from: outsider,
      to: account,
      groupJid: group.id,
      text: 'let me in',
    });
    assert.deepEqual(notMember, {
      status: 409,
      body: { error: { code: 409, message: `from: ${outsider} is not a member of ${group.id}` } },
    });
  });

  it('a device that lost a member’s sender key asks for a retry: the phone resends pairwise, then redistributes', async () => {
    const lost = [...client.auth.data.keys()].filter(
      (k) =>
        k.startsWith('sender-key:') &&
        k.includes(group.id) &&
        k.includes(sim.context.accounts.get(bruno)?.lid ?? '?'),
    );
    assert.ok(lost.length > 0, 'Baileys stored Bruno’s sender key');
    for (const k of lost) client.auth.data.delete(k);
    const retries: { id: string; count: number }[] = [];
    const onRetry = (r: { id: string; count: number }) => retries.push(r);
    sim.context.events.on('retry', onRetry);
    const ids: string[] = [];
    for (const text of ['after the key was lost', 'and the key is back']) {
      const received = waitForEvent(
        client,
        'messages.upsert',
        (u) => u.messages.some((m) => m.message?.conversation === text),
        text,
      );
      const sent = await control(sim, 'POST', '/messages', {
        from: bruno,
        to: account,
        groupJid: group.id,
        text,
      });
      const message = (await received).messages.find((m) => m.message?.conversation === text) as WAMessage;
      ids.push((sent.body as { id: string }).id);
      assert.equal(message.key.id, ids.at(-1));
      assert.equal(message.key.participant, lid(bruno));
    }
    sim.context.events.off('retry', onRetry);
    // One retry, for the first message only: the second carried the sender key again.
    assert.deepEqual(
      retries.map((r) => [r.id, r.count]),
      [[ids[0], 1]],
    );
  });

  it('group receipts carry the participant both ways', async () => {
    // A message sent a while ago: Baileys merges a receipt that arrives while its own upsert is still buffered
    // (event-buffer.js, 100 ms) into that upsert instead of emitting message-receipt.update.
    const id = firstSent;
    const update = waitForEvent(
      client,
      'message-receipt.update',
      (u) => u.some((r) => r.key.id === id),
      'receipt',
    );
    const receipt = await control(sim, 'POST', '/receipts', {
      from: bruno,
      to: account,
      ids: [id],
      type: 'read',
      groupJid: group.id,
    });
    assert.deepEqual(receipt, { status: 200, body: { sockets: 1 } });
    const [first] = (await update).filter((r) => r.key.id === id);
    assert.equal(first?.key.remoteJid, group.id);
    assert.equal(first?.receipt.userJid, lid(bruno));
    assert.equal(typeof first?.receipt.readTimestamp, 'number');

    const upserted = waitForEvent(
      client,
      'messages.upsert',
      (u) => u.messages.some((m) => m.message?.conversation === 'read mine'),
      'read mine',
    );
    const fromBruno = await control(sim, 'POST', '/messages', {
      from: bruno,
      to: account,
      groupJid: group.id,
      text: 'read mine',
    });
    const brunoId = (fromBruno.body as { id: string }).id;
    await upserted;
    await client.sock.readMessages([
      { remoteJid: group.id, id: brunoId, participant: lid(bruno), fromMe: false },
    ]);
    const read = await inbox(
      bruno,
      (e) => e.type === 'receipt' && e.receipt === 'read' && (e.ids ?? []).includes(brunoId),
      'the read receipt at Bruno',
    );
    assert.equal(read.from, account);
    assert.equal(read.group, group.id);
  });
});
