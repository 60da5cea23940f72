import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type GroupMetadata, processHistoryMessage, proto, type WAMessage } from 'baileys';
import { DomainError } from '../../src/domain/errors.ts';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { NOT_ADMIN } from '../../src/engines/baileys/group-admin.ts';
import { quieterLevel } from '../../src/engines/baileys/session-options.ts';
import { UnconfirmedRelayError } from '../../src/engines/engine.ts';
import { fakeSessionsPerSuite, isDomainError } from './fake-sessions.ts';
import { iqError, ME } from './fake-socket.ts';
import { until, untilAsync } from './support.ts';

const PEER = '5511988887777@s.whatsapp.net';
const PEER_LID = '12345678@lid';
const GROUP = '120363000000000001@g.us';
const ME_PHONE_JID = `${ME.phone}@s.whatsapp.net`;

/**
 * What a live (Baileys) session configures, sends, reads and records, over fake sockets: the socket's options
 * (docs/decisions/0025-live-engine.md), sends with their acks and nacks, reactions and read marks, number checks,
 * groups, incoming events with phone JIDs, labels and history sync. Its lifecycle: session-lifecycle.test.ts.
 */
describe('live session over a fake socket: what it configures, sends, reads and records', () => {
  const setup = fakeSessionsPerSuite();

  const ofType = <T extends EngineEvent['type']>(events: EngineEvent[], type: T) =>
    events.filter((e): e is Extract<EngineEvent, { type: T }> => e.type === type);

  it('configures Baileys as docs/decisions/0025-live-engine.md says: offline presence, no full history, store-backed getMessage, group cache', async () => {
    const { session, sock } = await setup();
    await session.connect();
    const config = sock().config;
    assert.equal(config.markOnlineOnConnect, false);
    assert.equal(config.syncFullHistory, false);
    assert.equal('shouldSyncHistoryMessage' in config, false, "Baileys' default (no FULL sync) applies");
    assert.equal(config.emitOwnEvents, false);
    assert.deepEqual(config.browser, ['parley', 'Chrome', '1.0']);
    assert.equal(config.logger?.level, 'silent', 'Baileys never logs more than parley');
    assert.deepEqual(
      [quieterLevel('info', 'warn'), quieterLevel('error', 'warn'), quieterLevel('debug', 'trace')],
      ['warn', 'error', 'debug'],
    );
    assert.equal(await config.getMessage?.({ id: 'missing' }), undefined);
    const sent = await session.send({ to: PEER, content: { kind: 'text', text: 'hey', linkPreview: false } });
    assert.deepEqual(await config.getMessage?.({ id: sent.id }), sock().relayed[0]?.message);
    const meta: GroupMetadata = { id: GROUP, subject: 'Team', owner: undefined, participants: [] };
    sock().emit('groups.upsert', [meta]);
    // A miss is fetched through the socket, which does not know the group: only the upsert fills the cache.
    await untilAsync(
      async () => (await config.cachedGroupMetadata?.(GROUP).catch(() => undefined)) !== undefined,
      'group cached',
    );
    assert.deepEqual(await config.cachedGroupMetadata?.(GROUP), meta);
    const fresh = { ...meta, subject: 'Renamed', participants: [{ id: PEER, admin: null }] };
    sock().groups.set(GROUP, fresh);
    sock().emit('group-participants.update', {
      id: GROUP,
      author: PEER,
      participants: [{ id: PEER }],
      action: 'add',
    });
    await untilAsync(
      async () => (await config.cachedGroupMetadata?.(GROUP))?.subject === 'Renamed',
      'refresh',
    );
    assert.deepEqual(await config.cachedGroupMetadata?.(GROUP), fresh, 'refreshed on group events');
  });

  it("a send's group missing from the cache is fetched by the session: kept, its LID pairs taught", async () => {
    // Baileys asks cachedGroupMetadata before relaying to a group and fetched the metadata itself on a miss, unseen:
    // the pairs it carried (a LID-addressed member's phone_number) never reached the resolver, so the member's
    // receipts named them by LID, flagged unresolved, though parley had had the number
    // (docs/decisions/0038-lid-mappings.md).
    const { session, rc, sock } = await setup();
    await session.connect();
    const config = sock().config;
    const dora = '5511955554444@s.whatsapp.net';
    const doraLid = '87654321@lid';
    const meta: GroupMetadata = {
      id: GROUP,
      subject: 'Team',
      owner: undefined,
      participants: [{ id: doraLid, phoneNumber: dora, admin: null }],
    };
    sock().groups.set(GROUP, meta);
    assert.deepEqual(await config.cachedGroupMetadata?.(GROUP), meta, 'fetched on a miss');
    sock().groups.delete(GROUP);
    assert.deepEqual(await config.cachedGroupMetadata?.(GROUP), meta, 'kept in the cache: not fetched again');
    assert.equal(
      await config.cachedGroupMetadata?.('status@broadcast'),
      undefined,
      'a status is never fetched',
    );
    sock().emit('message-receipt.update', [
      {
        key: { remoteJid: GROUP, fromMe: true, id: 'MINE', participant: doraLid },
        receipt: { userJid: doraLid, readTimestamp: 1_700_000_000 },
      },
    ]);
    await until(() => ofType(rc.events, 'receipt').length === 1, 2_000, 'the receipt');
    assert.deepEqual(ofType(rc.events, 'lid-mapping').at(-1)?.mappings, [
      { lid: '87654321', phone: '5511955554444' },
    ]);
    assert.deepEqual(ofType(rc.events, 'receipt')[0]?.source, {
      chat: GROUP,
      sender: dora,
      isFromMe: false,
      isGroup: true,
    });
  });

  it('sends: relays, waits for the ack, records the message; 463 and 429 nacks are their own errors', async () => {
    const { session, rc, sock } = await setup();
    await session.connect();
    const sent = await session.send({
      to: PEER,
      content: { kind: 'text', text: 'hello', linkPreview: false },
    });
    assert.match(sent.id, /^3EB0[0-9A-F]+$/);
    assert.equal(sock().relayed[0]?.jid, PEER);
    assert.equal(sock().relayed[0]?.message.extendedTextMessage?.text, 'hello');
    assert.deepEqual(ofType(rc.events, 'message').at(-1)?.message.source, {
      chat: PEER,
      sender: ME_PHONE_JID,
      isFromMe: true,
      isGroup: false,
    });
    assert.deepEqual(sock().presence, [PEER], 'presence subscribed for chat presence');
    sock().ackAttrs = { error: '463' };
    await assert.rejects(
      session.send({
        to: '5511911112222@s.whatsapp.net',
        content: { kind: 'text', text: 'x', linkPreview: false },
      }),
      (error: unknown) => {
        isDomainError('rate_limited', /463 reach-out timelock\) until 20/)(error);
        assert.ok(error instanceof DomainError && (error.retryAfter ?? 0) > 0);
        return true;
      },
    );
    sock().ackAttrs = { error: '429' };
    await assert.rejects(
      session.send({ to: PEER, content: { kind: 'text', text: 'x', linkPreview: false } }),
      isDomainError('rate_limited', /rate-overlimit/),
    );
    sock().ackAttrs = { error: '479' };
    await assert.rejects(
      session.send({ to: PEER, content: { kind: 'text', text: 'x', linkPreview: false } }),
      isDomainError('platform_refused', /error 479/),
    );
    sock().ackAttrs = undefined;
    const recorded = ofType(rc.events, 'message').length;
    const ended = sock().ended;
    await assert.rejects(
      session.send({ to: PEER, content: { kind: 'text', text: 'no ack', linkPreview: false } }),
      (error: unknown) => {
        assert.ok(
          error instanceof UnconfirmedRelayError,
          'a missing ack is an unknown outcome, never a success',
        );
        isDomainError('timeout', /did not confirm message 3EB0[0-9A-F]+ \(no ack within 0\.05 s/)(error);
        return true;
      },
    );
    assert.equal(sock().ended, ended + 1, 'the silent connection is ended as lost');
    assert.equal(sock().terminated, 1, 'at once: its WebSocket destroyed, with no closing handshake');
    assert.equal(ofType(rc.events, 'message').length, recorded, 'nothing recorded for the unconfirmed relay');
    // A socket that closes while the ack is awaited ends the wait at once, also an unknown outcome.
    const relayed = sock().relayed.length;
    const closing = session.send({ to: PEER, content: { kind: 'text', text: 'closed', linkPreview: false } });
    await until(() => sock().relayed.length > relayed, 2_000, 'the relay written');
    sock().close(428, 'Connection Closed');
    await assert.rejects(closing, (error: unknown) => {
      assert.ok(error instanceof UnconfirmedRelayError);
      assert.match((error as Error).message, /the connection closed before the platform acknowledged it/);
      return true;
    });
  });

  it('an ack that comes before the relay returns confirms it, and the connection is kept', async () => {
    const { session, rc, sock } = await setup();
    await session.connect();
    // Baileys writes the stanza, then commits its Signal keys to the store: the ack can come meanwhile. Before, the
    // ack wait's timer was armed after it anyway and ended the connection as lost once it ran out.
    sock().ackBeforeReturn = true;
    const sent = await session.send({
      to: PEER,
      content: { kind: 'text', text: 'early', linkPreview: false },
    });
    assert.equal(ofType(rc.events, 'message').at(-1)?.message.id, sent.id, 'recorded as sent');
    // A relay with no ack, armed after the first: its timer runs out after the first's would have.
    sock().ackAttrs = undefined;
    await assert.rejects(
      session.send({ to: PEER, content: { kind: 'text', text: 'no ack', linkPreview: false } }),
      (error: unknown) => error instanceof UnconfirmedRelayError,
    );
    assert.equal(sock().ended, 1, 'only the relay with no ack ended the connection');
  });

  it('reacts with the own key for `me:` ids and marks read (group receipts need the sender)', async () => {
    const { session, sock, rc } = await setup();
    await session.connect();
    const reaction = await session.react(PEER, '3EB0TARGET', true, '❤️');
    assert.equal(reaction.id, '3EB0TARGET');
    assert.deepEqual(
      { ...sock().relayed[0]?.message.reactionMessage?.key },
      { remoteJid: PEER, id: '3EB0TARGET', fromMe: true },
    );
    assert.equal(ofType(rc.events, 'message').at(-1)?.message.content.kind, 'reaction');
    await session.markRead(PEER, ['A1', 'A2']);
    await session.markRead(GROUP, ['G1'], PEER);
    assert.deepEqual(sock().read, [
      { remoteJid: PEER, id: 'A1', fromMe: false },
      { remoteJid: PEER, id: 'A2', fromMe: false },
      { remoteJid: GROUP, id: 'G1', fromMe: false, participant: PEER },
    ]);
    await assert.rejects(
      session.markRead(GROUP, ['G2']),
      isDomainError('invalid', /senderPhone is required/),
    );
  });

  it('checks numbers with verified business names; a platform 429 is its own error', async () => {
    const { session, sock } = await setup();
    await session.connect();
    const details = proto.VerifiedNameCertificate.Details.encode({
      serial: 1,
      issuer: 'smb:wa',
      verifiedName: 'Acme Ltd',
    }).finish();
    const cert = proto.VerifiedNameCertificate.encode({ details, signature: Buffer.alloc(64) }).finish();
    sock().usyncAnswer = {
      tag: 'iq',
      attrs: { type: 'result' },
      content: [
        {
          tag: 'usync',
          attrs: {},
          content: [
            {
              tag: 'list',
              attrs: {},
              content: [
                {
                  tag: 'user',
                  attrs: { jid: PEER },
                  content: [
                    { tag: 'contact', attrs: { type: 'in' }, content: Buffer.from('+5511988887777') },
                    {
                      tag: 'business',
                      attrs: {},
                      content: [{ tag: 'verified_name', attrs: {}, content: cert }],
                    },
                  ],
                },
                {
                  tag: 'user',
                  attrs: { jid: '5511900000000@s.whatsapp.net' },
                  content: [
                    { tag: 'contact', attrs: { type: 'out' }, content: Buffer.from('+5511900000000') },
                  ],
                },
              ],
            },
          ],
        },
      ],
    };
    assert.deepEqual(await session.checkPhones(['5511900000000', '5511988887777', '15550001111']), [
      { query: '5511900000000', isInPlatform: false, jid: null, verifiedName: '' },
      { query: '5511988887777', isInPlatform: true, jid: PEER, verifiedName: 'Acme Ltd' },
      { query: '15550001111', isInPlatform: false, jid: null, verifiedName: '' },
    ]);
    sock().usyncError = iqError(429, 'rate-overlimit');
    await assert.rejects(session.checkPhones(['5511988887777']), (error: unknown) => {
      isDomainError('rate_limited', /429 rate-overlimit/)(error);
      assert.equal(error instanceof DomainError && error.retryAfter, 60);
      return true;
    });
  });

  it('groups: create lists the creator as super admin; invite link needs admin (403); unknown group 404', async () => {
    const { session, sock } = await setup();
    await session.connect();
    const created = await session.createGroup('Team', [PEER]);
    assert.equal(created.name, 'Team');
    assert.equal(created.ownerJid, ME_PHONE_JID);
    assert.deepEqual(created.participants[0], { jid: ME_PHONE_JID, isAdmin: true, isSuperAdmin: true });
    sock().groups.set(GROUP, {
      id: GROUP,
      subject: 'Theirs',
      owner: PEER,
      participants: [
        { id: PEER, admin: 'superadmin' },
        { id: ME_PHONE_JID, admin: null },
      ],
    });
    await assert.rejects(session.groupInviteCode(GROUP), isDomainError('forbidden', new RegExp(NOT_ADMIN)));
    sock().groups.set(GROUP, {
      id: GROUP,
      subject: 'Ours',
      owner: PEER,
      participants: [{ id: ME_PHONE_JID, admin: 'admin' }],
    });
    sock().inviteCodes.set(GROUP, 'AbCdEf123');
    assert.equal(await session.groupInviteCode(GROUP), 'AbCdEf123');
    sock().inviteError = iqError(401, 'not-authorized');
    await assert.rejects(session.groupInviteCode(GROUP), isDomainError('forbidden', new RegExp(NOT_ADMIN)));
    sock().groupError = iqError(403, 'forbidden');
    await assert.rejects(session.groupInfo(GROUP), isDomainError('not_found', /group not found/));
    sock().groupError = undefined;
    await assert.rejects(
      session.groupInfo('120363999999999999@g.us'),
      isDomainError('not_found', /group not found/),
    );
    assert.deepEqual(
      (await session.listGroups()).map((g) => g.jid),
      [GROUP],
    );
  });

  it('marks a message whose first delivery could not be decrypted as one that may come again', async () => {
    const { session, rc, sock } = await setup();
    await session.connect();
    const key = { remoteJid: PEER, fromMe: false, id: '3EB0RESENT' };
    // The first delivery could not be decrypted: Baileys upserts a stub and asks the sender and the phone again.
    sock().emit('messages.upsert', {
      type: 'notify',
      messages: [
        {
          key,
          messageStubType: proto.WebMessageInfo.StubType.CIPHERTEXT,
          messageStubParameters: ['No session found to decrypt message'],
          messageTimestamp: 1_700_000_000,
        },
      ],
    });
    // The sender's resend, then the phone's placeholder resend: both live.
    for (let i = 0; i < 2; i++)
      sock().emit('messages.upsert', {
        type: 'notify',
        messages: [{ key, message: { conversation: 'resent' }, messageTimestamp: 1_700_000_000 }],
      });
    sock().emit('messages.upsert', {
      type: 'notify',
      messages: [
        {
          key: { ...key, id: '3EB0FRESH' },
          message: { conversation: 'first delivery' },
          messageTimestamp: 1_700_000_000,
        },
      ],
    });
    await until(() => ofType(rc.events, 'message').length === 3, 2_000, 'messages');
    assert.deepEqual(
      ofType(rc.events, 'message').map((event) => [event.message.id, event.mayRepeat]),
      [
        ['3EB0RESENT', true],
        ['3EB0RESENT', true],
        ['3EB0FRESH', undefined],
      ],
      'the stub itself is not recorded; both resends are looked up as possible copies',
    );
  });

  it('marks the resends of a message whose first delivery could not be decrypted on a socket since replaced', async () => {
    const { session, rc, sock, fake } = await setup();
    await session.connect();
    const key = { remoteJid: PEER, fromMe: false, id: '3EB0RESENTAFTER' };
    sock().emit('messages.upsert', {
      type: 'notify',
      messages: [
        {
          key,
          messageStubType: proto.WebMessageInfo.StubType.CIPHERTEXT,
          messageStubParameters: ['No session found to decrypt message'],
          messageTimestamp: 1_700_000_000,
        },
      ],
    });
    // The connection is renewed before the resends come (a restart the platform asks for).
    sock().close(515, 'Stream Errored (restart required)');
    await until(() => session.state().connected && fake.sockets.length === 2, 2_000, 'reopened');
    // The sender's resend, then the phone's placeholder resend: both live, on the new socket.
    for (let i = 0; i < 2; i++)
      sock().emit('messages.upsert', {
        type: 'notify',
        messages: [{ key, message: { conversation: 'resent' }, messageTimestamp: 1_700_000_000 }],
      });
    await until(() => ofType(rc.events, 'message').length === 2, 2_000, 'messages');
    assert.deepEqual(
      ofType(rc.events, 'message').map((event) => [event.message.id, event.mayRepeat]),
      [
        ['3EB0RESENTAFTER', true],
        ['3EB0RESENTAFTER', true],
      ],
      'both resends are looked up as possible copies',
    );
  });

  it('maps incoming events to domain events with phone JIDs, in arrival order', async () => {
    const { session, rc, sock } = await setup();
    await session.connect();
    const incoming = (over: Partial<WAMessage['key']>, text: string, pushName = 'Ana'): WAMessage => ({
      key: { remoteJid: PEER_LID, fromMe: false, id: `3EB0${text.toUpperCase()}`, ...over },
      message: { conversation: text },
      messageTimestamp: 1_700_000_000,
      pushName,
    });
    sock().emit('messages.upsert', {
      type: 'notify',
      messages: [
        incoming({ remoteJidAlt: PEER }, 'one'),
        incoming({ remoteJid: 'status@broadcast', participant: PEER }, 'story'),
      ],
    });
    sock().emit('lid-mapping.update', { lid: '5151@lid', pn: '5511951515151@s.whatsapp.net' });
    sock().emit('messages.upsert', {
      type: 'append',
      messages: [incoming({ remoteJid: '5151@lid' }, 'two')],
    });
    sock().frame({
      tag: 'chatstate',
      attrs: { from: PEER_LID },
      content: [{ tag: 'composing', attrs: { media: 'audio' } }],
    });
    sock().emit('messages.update', [
      {
        key: { remoteJid: PEER_LID, fromMe: true, id: 'MINE' },
        update: { status: proto.WebMessageInfo.Status.READ },
      },
    ]);
    sock().emit('contacts.upsert', [
      { id: PEER_LID, phoneNumber: PEER, lid: PEER_LID, name: 'Ana Souza', notify: 'Ana' },
    ]);
    sock().emit('contacts.update', [{ id: PEER, notify: 'Aninha' }]);
    // The same push name again (Baileys reports it with every message): nothing changed, so no event.
    sock().emit('contacts.update', [{ id: PEER, notify: 'Aninha' }]);
    sock().emit('contacts.update', [{ id: PEER, notify: 'Nina' }]);
    await until(() => rc.events.filter((e) => e.type === 'contacts').length === 3, 2_000, 'events');
    const types = rc.events.filter((e) => e.type !== 'connection').map((e) => e.type);
    // The pairs learned (docs/decisions/0038-lid-mappings.md) are recorded as one lid-mapping event, before the
    // first event recorded after they were learned: the message whose stanza taught one of them.
    assert.deepEqual(types, [
      'lid-mapping',
      'message',
      'message',
      'presence',
      'receipt',
      'contacts',
      'contacts',
      'contacts',
    ]);
    assert.deepEqual(
      ofType(rc.events, 'contacts').map((event) => event.contacts.map((contact) => contact.pushName)),
      [['Ana'], ['Aninha'], ['Nina']],
    );
    assert.deepEqual(ofType(rc.events, 'lid-mapping')[0]?.mappings, [
      { lid: '5151', phone: '5511951515151' },
      { lid: PEER_LID.split('@')[0], phone: PEER.split('@')[0] },
    ]);
    const [one, two] = ofType(rc.events, 'message');
    assert.equal(one?.message.source.chat, PEER);
    assert.equal(two?.message.source.chat, '5511951515151@s.whatsapp.net');
    // Offline delivery (`append`), where a message handed over before may come again, is marked for the copy check.
    assert.deepEqual([one?.mayRepeat, two?.mayRepeat], [undefined, true]);
    assert.deepEqual(ofType(rc.events, 'presence')[0], {
      type: 'presence',
      source: { chat: PEER, sender: PEER, isFromMe: false, isGroup: false },
      state: 'composing',
      media: 'audio',
    });
    assert.equal(ofType(rc.events, 'receipt')[0]?.state, 'read');
    assert.deepEqual(await session.contacts(), [
      { jid: PEER, businessName: '', firstName: 'Ana', fullName: 'Ana Souza', pushName: 'Nina' },
    ]);
  });

  it('labels (docs/decisions/0045-business-labels.md): changes as chatModify then recorded; synced ones recorded; the business profile asked once per socket', async () => {
    const { session, rc, sock } = await setup();
    await session.connect();
    assert.equal(await session.isBusiness?.(), false, 'no business profile: a personal account');
    sock().businessProfile = {
      description: 'Open 9 to 18',
      website: [],
      email: undefined,
      business_hours: {},
    };
    assert.equal(await session.isBusiness?.(), false, 'asked once per socket');
    const vip = { id: '1', name: 'VIP', color: 2, predefinedId: null };
    await session.editLabel?.({ ...vip, deleted: false });
    await session.labelChat?.(PEER, vip, true);
    assert.deepEqual(sock().chatModifications, [
      { mod: { addLabel: { id: '1', name: 'VIP', color: 2, deleted: false } }, jid: ME_PHONE_JID },
      { mod: { addChatLabel: { labelId: '1' } }, jid: PEER },
    ]);
    sock().emit('lid-mapping.update', { lid: PEER_LID, pn: PEER });
    sock().emit('labels.edit', { id: '2', name: 'Paid', color: 5, deleted: false });
    sock().emit('labels.association', {
      type: 'remove',
      association: { type: 'label_jid', chatId: PEER_LID, labelId: '1' },
    } as never);
    await until(() => rc.events.filter((e) => e.type === 'chat-label').length === 2, 2000, 'label events');
    assert.deepEqual(
      rc.events.filter((e) => e.type === 'label' || e.type === 'chat-label'),
      [
        { type: 'label', label: { ...vip, deleted: false } },
        { type: 'chat-label', change: { chat: PEER, labelId: '1', labeled: true } },
        { type: 'label', label: { id: '2', name: 'Paid', color: 5, predefinedId: null, deleted: false } },
        { type: 'chat-label', change: { chat: PEER, labelId: '1', labeled: false } },
      ],
    );
  });

  it("an edit whose stanza teaches the sender's LID pair comes after the pair and is not dropped", async () => {
    // The message was stored under the LID (no pair known). The edit came with the phone number beside the LID, so it
    // names the phone JID: it was dropped as an edit of a message of another chat, and the pair was recorded after
    // it, too late for the recorder to move the LID chat first (docs/decisions/0038-lid-mappings.md).
    const { session, rc, sock } = await setup();
    await session.connect();
    const lid = '4242@lid';
    const phone = '5511942424242@s.whatsapp.net';
    sock().emit('messages.upsert', {
      type: 'notify',
      messages: [
        {
          key: { remoteJid: lid, fromMe: false, id: '3EB0TYPO' },
          message: { conversation: 'tpyo' },
          messageTimestamp: 1_700_000_000,
          pushName: 'Private',
        },
      ],
    });
    await until(() => ofType(rc.events, 'message').length === 1, 2_000, 'the message');
    assert.equal(ofType(rc.events, 'message')[0]?.message.source.chat, lid);
    sock().emit('messages.upsert', {
      type: 'notify',
      messages: [
        {
          key: { remoteJid: lid, remoteJidAlt: phone, fromMe: false, id: '3EB0EDIT' },
          message: {
            protocolMessage: {
              type: proto.Message.ProtocolMessage.Type.MESSAGE_EDIT,
              key: { remoteJid: lid, fromMe: false, id: '3EB0TYPO' },
              editedMessage: { conversation: 'typo' },
            },
          },
          messageTimestamp: 1_700_000_001,
        },
      ],
    });
    await until(() => ofType(rc.events, 'messageUpdate').length === 1, 2_000, 'the edit');
    assert.deepEqual(
      rc.events.map((event) => event.type).filter((type) => type !== 'connection'),
      ['message', 'lid-mapping', 'messageUpdate'],
    );
    assert.deepEqual(ofType(rc.events, 'lid-mapping')[0]?.mappings, [
      { lid: '4242', phone: '5511942424242' },
    ]);
    assert.deepEqual(ofType(rc.events, 'messageUpdate')[0]?.update.source.chat, phone);
  });

  it('history sync: a HistorySync event with phone JIDs, and its contacts stored for the contacts list', async () => {
    const { session, rc, sock } = await setup();
    await session.connect();
    const sync = proto.HistorySync.decode(
      proto.HistorySync.encode({
        syncType: proto.HistorySync.HistorySyncType.RECENT,
        progress: 100,
        conversations: [
          {
            id: '7070@lid',
            pnJid: '5511970707070@s.whatsapp.net',
            displayName: 'Duda',
            messages: [
              {
                message: {
                  key: { remoteJid: '7070@lid', fromMe: true, id: 'HX1' },
                  message: { conversation: 'sent long ago' },
                  messageTimestamp: 1_690_000_000,
                },
              },
            ],
          },
        ],
      }).finish(),
    );
    const data = processHistoryMessage(sync);
    sock().emit('messaging-history.set', {
      ...data,
      syncType: data.syncType ?? null,
      progress: data.progress ?? null,
    });
    await until(() => ofType(rc.events, 'contacts').length === 1, 2_000, 'contacts');
    const history = ofType(rc.events, 'history')[0];
    assert.equal(history?.syncType, 'RECENT');
    assert.deepEqual(history?.chats[0]?.messages[0]?.source, {
      chat: '5511970707070@s.whatsapp.net',
      sender: ME_PHONE_JID,
      isFromMe: true,
      isGroup: false,
    });
    assert.deepEqual(await session.contacts(), [
      {
        jid: '5511970707070@s.whatsapp.net',
        businessName: '',
        firstName: 'Duda',
        fullName: 'Duda',
        pushName: '',
      },
    ]);
  });
});
