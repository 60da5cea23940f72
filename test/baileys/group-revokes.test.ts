import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type GroupMetadata, proto, type WAMessage } from 'baileys';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { fakeSessionsPerSuite } from './fake-sessions.ts';
import { boom, ME } from './fake-socket.ts';
import { capturingLogger, until } from './support.ts';

const GROUP = '120363000000000077@g.us';
const ANA = '5511911117001@s.whatsapp.net';
const BIA = '5511911117002@s.whatsapp.net';
const CARLA = '5511911117003@s.whatsapp.net';

/** The group's metadata: Carla its admin, Ana and Bia plain members, the account a member. */
const META: GroupMetadata = {
  id: GROUP,
  subject: 'Orders',
  owner: CARLA,
  participants: [
    { id: CARLA, admin: 'superadmin' },
    { id: ANA, admin: null },
    { id: BIA, admin: null },
    { id: `${ME.phone}@s.whatsapp.net`, admin: null },
  ],
};

/** Member `from` deletes for everyone message `id` that `sender` sent to the group (platform message `platformId`). */
function revoke(from: string, sender: string, id: string, platformId: string): WAMessage {
  return {
    key: { remoteJid: GROUP, fromMe: false, id: platformId, participant: from },
    message: {
      protocolMessage: {
        type: proto.Message.ProtocolMessage.Type.REVOKE,
        key: { remoteJid: GROUP, fromMe: from === sender, id, participant: sender },
      },
    },
    messageTimestamp: 1_900_000_000,
  };
}

/**
 * The live engine tells whether the sender of a deletion in a group of another member's message is an admin of the
 * group (src/engines/baileys/group-revokes.ts, docs/decisions/0026-chats-edits-polls-and-calls.md): only then is the
 * deletion marked `byAdmin`, which the message store requires to take it. The group's metadata is read from the
 * session's cache, else fetched; a fetch that fails is tried again until the session stops, and a deletion whose
 * sender's role cannot be read at all is reported unverified (the store keeps the message) rather than lost or taken
 * as an admin's (docs/decisions/0106-unverified-group-deletions.md).
 */
describe('live session over a fake socket: deletions in a group by another member than the sender', () => {
  const setup = fakeSessionsPerSuite();

  const deletions = (events: EngineEvent[]) =>
    events.filter((e): e is Extract<EngineEvent, { type: 'messageUpdate' }> => e.type === 'messageUpdate');

  it('the admin’s deletion is marked byAdmin, a plain member’s is not, an own deletion needs no metadata', async () => {
    const { session, rc, sock } = await setup();
    await session.connect();
    sock().groups.set(GROUP, META);
    let fetched = 0;
    const fetch = sock().groupMetadata;
    sock().groupMetadata = async (jid: string) => {
      fetched++;
      return fetch(jid);
    };
    sock().emit('messages.upsert', {
      type: 'notify',
      messages: [
        revoke(CARLA, ANA, 'MSG1', 'REV1'),
        revoke(BIA, ANA, 'MSG2', 'REV2'),
        revoke(ANA, ANA, 'MSG3', 'REV3'),
      ],
    });
    await until(() => deletions(rc.events).length === 3, 5_000, 'the three deletions');
    const [admin, member, own] = deletions(rc.events);
    assert.equal(admin?.update.byAdmin, true);
    assert.equal(admin?.platformId, 'REV1', 'the platform message’s id rides along (a repeat is told by it)');
    assert.equal(member?.update.byAdmin, undefined);
    assert.equal(own?.update.byAdmin, undefined);
    assert.equal(own?.update.source.sender, ANA);
    // The first fetch fills the cache, which says Bia is no admin; her deletion fetches afresh (a promotion may be
    // newer than the cached copy); Ana's own needs none.
    assert.equal(fetched, 2);
  });

  it('a metadata read that fails once is tried again: the admin’s deletion is marked', async () => {
    const { session, rc, sock } = await setup();
    await session.connect();
    sock().groups.set(GROUP, META);
    let failures = 0;
    const fetch = sock().groupMetadata;
    sock().groupMetadata = async (jid: string) => {
      if (failures++ === 0) throw boom('Timed Out', { statusCode: 408 });
      return fetch(jid);
    };
    sock().emit('messages.upsert', { type: 'notify', messages: [revoke(CARLA, ANA, 'MSG4', 'REV4')] });
    await until(() => deletions(rc.events).length === 1, 5_000, 'the deletion');
    assert.equal(deletions(rc.events)[0]?.update.byAdmin, true);
    assert.equal(failures, 2, 'one failed read, one that answered');
  });

  it('metadata never read: the deletion is reported unverified, no admin mark, logged; the batch goes on', async () => {
    // Before, it was marked an admin's (byAdmin), and the store deleted another member's message on no evidence
    // (docs/decisions/0106-unverified-group-deletions.md).
    const { logger, lines } = capturingLogger();
    const { session, rc, sock } = await setup({ context: { logger } });
    await session.connect();
    sock().groupError = boom('Connection Closed', { statusCode: 428 });
    sock().emit('messages.upsert', {
      type: 'notify',
      messages: [
        revoke(CARLA, ANA, 'MSG5', 'REV5'),
        {
          key: { remoteJid: GROUP, fromMe: false, id: 'AFTER5', participant: BIA },
          message: { conversation: 'after the deletion' },
          messageTimestamp: 1_900_000_001,
        },
      ],
    });
    await until(() => rc.events.some((e) => e.type === 'message'), 10_000, 'the message after it');
    assert.equal(deletions(rc.events)[0]?.update.byAdmin, undefined);
    assert.equal(deletions(rc.events)[0]?.update.unverified, true);
    assert.ok(lines.some((line) => /could not be read; the message is kept/.test(String(line.msg))));
  });

  it('a stop while the metadata read fails: the close is not held by its retries; deletion unverified', async () => {
    // Before, the read was tried 4 times over 3.5 s whatever the session did, and the close waited for the queue.
    const { session, rc, sock } = await setup();
    await session.connect();
    let tries = 0;
    sock().groupMetadata = async () => {
      tries++;
      throw boom('Timed Out', { statusCode: 408 });
    };
    sock().emit('messages.upsert', { type: 'notify', messages: [revoke(CARLA, ANA, 'MSG8', 'REV8')] });
    await until(() => tries === 1, 5_000, 'the first read');
    const started = Date.now();
    await session.close();
    const tookMs = Date.now() - started;
    assert.ok(tookMs < 1_500, `the close took ${tookMs} ms`);
    assert.equal(tries, 1, 'no read after the stop');
    const [deletion, ...more] = deletions(rc.events);
    assert.deepEqual(more, []);
    assert.equal(deletion?.update.messageId, 'MSG8');
    assert.equal(deletion?.update.unverified, true, 'recorded per the rule, not lost');
    assert.equal(deletion?.update.byAdmin, undefined);
  });

  it('a stop while a metadata read waits for the platform: the read is left, the deletion unverified', async () => {
    const { session, rc, sock } = await setup();
    await session.connect();
    let tries = 0;
    // The platform never answers (a read waits out Baileys' 20 s query timeout).
    sock().groupMetadata = () => {
      tries++;
      return new Promise<GroupMetadata>(() => {});
    };
    sock().emit('messages.upsert', { type: 'notify', messages: [revoke(CARLA, ANA, 'MSG9', 'REV9')] });
    await until(() => tries === 1, 5_000, 'the read under way');
    let timer: NodeJS.Timeout | undefined;
    const held = new Promise<'held'>((resolve) => {
      timer = setTimeout(() => resolve('held'), 3_000);
    });
    const outcome = await Promise.race([session.close().then(() => 'closed' as const), held]);
    clearTimeout(timer);
    assert.equal(outcome, 'closed', 'the close waited for the platform’s answer');
    assert.equal(deletions(rc.events)[0]?.update.unverified, true);
  });

  it('a connect after a stop reads again: the admin’s deletion is marked', async () => {
    const { session, rc, sock } = await setup();
    await session.connect();
    await session.disconnect();
    await session.connect();
    sock().groups.set(GROUP, META);
    sock().emit('messages.upsert', { type: 'notify', messages: [revoke(CARLA, ANA, 'MSG10', 'REV10')] });
    await until(() => deletions(rc.events).length === 1, 5_000, 'the deletion');
    assert.equal(deletions(rc.events)[0]?.update.byAdmin, true);
  });

  it('a plain member’s deletion while the metadata read fails: the cached copy says no admin, not marked', async () => {
    const { session, rc, sock } = await setup();
    await session.connect();
    sock().emit('groups.upsert', [META]);
    sock().groupError = boom('Connection Closed', { statusCode: 428 });
    sock().emit('messages.upsert', { type: 'notify', messages: [revoke(BIA, ANA, 'MSG6', 'REV6')] });
    await until(() => deletions(rc.events).length === 1, 10_000, 'the deletion');
    assert.equal(deletions(rc.events)[0]?.update.byAdmin, undefined);
  });

  it('an edit and a message in one batch while the store fails reads: neither is lost', async () => {
    // Before, the engine read an edit's message from the store before recording it, with no retry: a failed read
    // rejected the batch's whole task (only logged), losing the edit and every later message of the batch.
    const failing = async () => {
      throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
    };
    const { session, rc, sock } = await setup({ context: { findMessage: failing } });
    await session.connect();
    sock().emit('messages.upsert', {
      type: 'notify',
      messages: [
        {
          key: { remoteJid: ANA, fromMe: false, id: 'EDIT7' },
          message: {
            protocolMessage: {
              type: proto.Message.ProtocolMessage.Type.MESSAGE_EDIT,
              key: { remoteJid: ANA, fromMe: true, id: 'MSG7' },
              editedMessage: { conversation: 'at 6?' },
            },
          },
          messageTimestamp: 1_900_000_002,
        },
        {
          key: { remoteJid: ANA, fromMe: false, id: 'NEXT7' },
          message: { conversation: 'and one more thing' },
          messageTimestamp: 1_900_000_003,
        },
      ],
    });
    await until(() => rc.events.some((e) => e.type === 'message'), 5_000, 'the message after the edit');
    assert.deepEqual(
      rc.events.filter((e) => e.type === 'messageUpdate' || e.type === 'message').map((e) => e.type),
      ['messageUpdate', 'message'],
    );
  });
});
