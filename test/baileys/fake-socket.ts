import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import {
  type AuthenticationCreds,
  assertNodeErrorFree,
  type BaileysEventMap,
  type BinaryNode,
  type ChatModification,
  type Contact,
  type GroupMetadata,
  initAuthCreds,
  type proto,
  type UserFacingSocketConfig,
  type WABusinessProfile,
  type WAMessageKey,
} from 'baileys';
import { CREDS_CATEGORY, CREDS_ID, encodeAuthValue } from '../../src/engines/baileys/auth-state.ts';
import type { SocketFactory, SocketLike } from '../../src/engines/baileys/socket.ts';
import type { AuthStateStore } from '../../src/engines/engine.ts';

/**
 * An error shaped exactly as `@hapi/boom` makes them (Boom returns a plain `Error` decorated with `isBoom`,
 * `isServer`, `data` and `output`), as Baileys passes in `lastDisconnect.error`.
 */
export function boom(message: string, options: { statusCode?: number; data?: unknown }): Error {
  const statusCode = options.statusCode ?? 500;
  return Object.assign(new Error(message), {
    isBoom: true,
    isServer: statusCode >= 500,
    data: options.data ?? null,
    output: { statusCode, payload: { statusCode, error: 'Error', message }, headers: {} },
  });
}

/** The error Baileys throws for an `<iq>` answered with `<error code text>` (assertNodeErrorFree). */
export function iqError(code: number, text: string): Error {
  try {
    assertNodeErrorFree({
      tag: 'iq',
      attrs: {},
      content: [{ tag: 'error', attrs: { code: String(code), text } }],
    });
  } catch (error) {
    return error as Error;
  }
  throw new Error('unreachable');
}

/** Own identity used by the fixtures. */
export const ME = {
  phone: '5511999990000',
  id: '5511999990000:7@s.whatsapp.net',
  lid: '99887766:7@lid',
  name: 'Parley',
};

/** Credentials of a linked device (pairing done): `initAuthCreds()` plus `me` and a phone-signed `account`. */
export function pairedCreds(): AuthenticationCreds {
  const creds = initAuthCreds();
  creds.me = { id: ME.id, lid: ME.lid, name: ME.name };
  creds.account = {
    details: randomBytes(24),
    accountSignatureKey: randomBytes(32),
    accountSignature: randomBytes(64),
    deviceSignature: randomBytes(64),
  };
  creds.platform = 'android';
  return creds;
}

/** Stores paired credentials for an instance, as a previous session would have. */
export async function storePairedCreds(store: AuthStateStore): Promise<AuthenticationCreds> {
  const creds = pairedCreds();
  await store.set([{ category: CREDS_CATEGORY, id: CREDS_ID, value: encodeAuthValue(creds) }]);
  return creds;
}

/**
 * A fake Baileys socket: an EventEmitter-based `ev` and `ws`, and recorders for every call the engine makes.
 * Test helpers (`open`, `qr`, `close`, `ack`) emit what the real socket would.
 */
export class FakeSocket implements SocketLike {
  readonly config: UserFacingSocketConfig;
  readonly events = new EventEmitter();
  readonly frames = new EventEmitter();
  readonly relayed: {
    jid: string;
    message: proto.IMessage;
    messageId: string;
    /** The relay's `statusJidList` (a status), when given. */
    statusJidList?: string[];
  }[] = [];
  readonly read: WAMessageKey[] = [];
  readonly presence: string[] = [];
  readonly queries: BinaryNode[] = [];
  ended = 0;
  loggedOut = false;
  /** What to answer to a relayed message: an `<ack>` with these attrs (undefined = no ack). */
  ackAttrs: Record<string, string> | undefined = {};
  /**
   * The ack comes before `relayMessage` returns (as when Baileys commits its Signal keys to a slow store after
   * writing the stanza) rather than just after.
   */
  ackBeforeReturn = false;
  /** How many times the WebSocket under the socket was destroyed without a closing handshake (`ws` `terminate`). */
  terminated = 0;
  /**
   * The peer answers no close frame (a frozen connection): `end` leaves the WebSocket open, as `ws` would for 30 s;
   * only a `terminate` closes it.
   */
  frozen = false;
  usyncAnswer: BinaryNode | undefined;
  usyncError: Error | undefined;
  groups = new Map<string, GroupMetadata>();
  inviteCodes = new Map<string, string>();
  groupError: Error | undefined;
  inviteError: Error | undefined;
  lids = new Map<string, string>();
  queryAnswer: (node: BinaryNode) => Promise<BinaryNode | undefined> = async () => undefined;

  constructor(config: UserFacingSocketConfig) {
    this.config = config;
    this.frames.setMaxListeners(0);
  }

  ev = {
    on: <E extends keyof BaileysEventMap>(event: E, listener: (arg: BaileysEventMap[E]) => void) => {
      this.events.on(event, listener);
    },
    off: <E extends keyof BaileysEventMap>(event: E, listener: (arg: BaileysEventMap[E]) => void) => {
      this.events.off(event, listener);
    },
  };
  ws = {
    on: (event: string, listener: (node: BinaryNode) => void) => this.frames.on(event, listener),
    off: (event: string, listener: (node: BinaryNode) => void) => this.frames.off(event, listener),
    /** The `ws` WebSocket Baileys' client keeps in `socket`. */
    socket: new FakeWebSocket(() => {
      this.terminated += 1;
    }),
  };
  get user(): Contact | undefined {
    return this.config.auth.creds.me;
  }
  signalRepository = {
    lidMapping: {
      getPNForLID: async (lid: string) => this.lids.get(lid) ?? null,
      getLIDForPN: async (_pn: string): Promise<string | null> => null,
    },
  };

  /** Emits a Baileys event (as `sock.ev.emit`). */
  emit<E extends keyof BaileysEventMap>(event: E, arg: BaileysEventMap[E]): void {
    if (event === 'creds.update') Object.assign(this.config.auth.creds, arg);
    this.events.emit(event, arg);
  }
  open(): void {
    this.emit('connection.update', { connection: 'open' });
  }
  qr(code: string): void {
    this.emit('connection.update', { qr: code });
  }
  close(statusCode: number, message = 'closed'): void {
    this.emit('connection.update', {
      connection: 'close',
      lastDisconnect: { error: boom(message, { statusCode }), date: new Date() },
    });
  }
  /** Delivers a raw stanza, as Baileys emits frames (`CB:<tag>` and `TAG:<id>`). */
  frame(node: BinaryNode): void {
    this.frames.emit(`CB:${node.tag}`, node);
    if (node.attrs.id) this.frames.emit(`TAG:${node.attrs.id}`, node);
  }

  relayMessage = async (
    jid: string,
    message: proto.IMessage,
    opts: { messageId?: string; statusJidList?: string[] },
  ) => {
    const messageId = opts.messageId ?? 'NOID';
    this.relayed.push({
      jid,
      message,
      messageId,
      ...(opts.statusJidList ? { statusJidList: opts.statusJidList } : {}),
    });
    const attrs = this.ackAttrs;
    if (attrs) {
      const ack = () => this.frame({ tag: 'ack', attrs: { class: 'message', id: messageId, ...attrs } });
      if (this.ackBeforeReturn) ack();
      else setImmediate(ack);
    }
    return messageId;
  };
  waUploadToServer = async () => ({
    mediaUrl: 'https://mmg.whatsapp.net/v/t62/fake',
    directPath: '/v/t62/fake',
  });
  readMessages = async (keys: WAMessageKey[]) => {
    this.read.push(...keys);
  };
  executeUSyncQuery = async (query: Parameters<SocketLike['executeUSyncQuery']>[0]) => {
    if (this.usyncError) throw this.usyncError;
    this.queries.push({ tag: 'usync', attrs: {}, content: query.protocols.map((p) => p.getQueryElement()) });
    return query.parseUSyncQueryResult(this.usyncAnswer);
  };
  groupCreate = async (subject: string, participants: string[]) => {
    if (this.groupError) throw this.groupError;
    const meta: GroupMetadata = {
      id: '120363000000000001@g.us',
      subject,
      owner: ME.lid.replace(':7', ''),
      ownerPn: `${ME.phone}@s.whatsapp.net`,
      creation: 1_700_000_000,
      participants: participants.map((id) => ({ id, admin: null })),
    };
    this.groups.set(meta.id, meta);
    return meta;
  };
  groupFetchAllParticipating = async () => Object.fromEntries(this.groups);
  groupMetadata = async (jid: string) => {
    if (this.groupError) throw this.groupError;
    const meta = this.groups.get(jid);
    if (!meta) throw iqError(404, 'item-not-found');
    return meta;
  };
  groupInviteCode = async (jid: string) => {
    if (this.inviteError) throw this.inviteError;
    return this.inviteCodes.get(jid);
  };
  /** Group administration calls, recorded as `[method, ...args]`; answers are set per test. */
  groupCalls: unknown[][] = [];
  participantAnswers: { status: string; jid: string | undefined; content: BinaryNode }[] = [];
  groupParticipantsUpdate = async (jid: string, participants: string[], action: string) => {
    this.groupCalls.push(['groupParticipantsUpdate', jid, participants, action]);
    return this.participantAnswers;
  };
  groupUpdateSubject = async (jid: string, subject: string) => {
    this.groupCalls.push(['groupUpdateSubject', jid, subject]);
  };
  groupUpdateDescription = async (jid: string, description?: string) => {
    this.groupCalls.push(['groupUpdateDescription', jid, description]);
  };
  groupSettingUpdate = async (jid: string, setting: string) => {
    this.groupCalls.push(['groupSettingUpdate', jid, setting]);
  };
  groupToggleEphemeral = async (jid: string, expiration: number) => {
    this.groupCalls.push(['groupToggleEphemeral', jid, expiration]);
  };
  groupLeave = async (jid: string) => {
    this.groupCalls.push(['groupLeave', jid]);
  };
  groupAcceptInvite = async (code: string) => {
    this.groupCalls.push(['groupAcceptInvite', code]);
    return undefined as string | undefined;
  };
  groupRevokeInvite = async (jid: string) => {
    this.groupCalls.push(['groupRevokeInvite', jid]);
    return this.inviteCodes.get(jid);
  };
  presenceSubscribe = async (jid: string) => {
    this.presence.push(jid);
  };
  /** Presence updates the engine sent: `[state, chat]`. */
  readonly presenceUpdates: [string, string | undefined][] = [];
  sendPresenceUpdate = async (type: string, toJid?: string) => {
    this.presenceUpdates.push([type, toJid]);
  };
  query = async (node: BinaryNode) => this.queryAnswer(node);
  requestPairingCode = async (_phone: string) => 'PARL3YOK';
  waitForSocketOpen = async () => undefined;
  logout = async () => {
    this.loggedOut = true;
  };
  /** Baileys' `end`: its closing handshake closes the WebSocket at once, unless the peer is {@link frozen}. */
  end = async () => {
    this.ended += 1;
    if (!this.frozen) this.ws.socket.close();
  };
  /** Calls rejected through `rejectCall` (call id, caller). */
  rejectedCalls: { id: string; from: string }[] = [];
  rejectCall = async (id: string, from: string) => {
    this.rejectedCalls.push({ id, from });
  };
  fetchAccountReachoutTimelock = async () => ({
    isActive: true,
    timeEnforcementEnds: new Date(Date.now() + 3_600_000),
  });
  /** The account's settings as the account calls changed them (privacy by platform category, blocked JIDs). */
  privacySettings: Record<string, string> = {};
  blocked: string[] = [];
  fetchPrivacySettings = async () => ({ ...this.privacySettings });
  updateLastSeenPrivacy = async (value: string) => {
    this.privacySettings.last = value;
  };
  updateOnlinePrivacy = async (value: string) => {
    this.privacySettings.online = value;
  };
  updateProfilePicturePrivacy = async (value: string) => {
    this.privacySettings.profile = value;
  };
  updateStatusPrivacy = async (value: string) => {
    this.privacySettings.status = value;
  };
  updateGroupsAddPrivacy = async (value: string) => {
    this.privacySettings.groupadd = value;
  };
  updateReadReceiptsPrivacy = async (value: string) => {
    this.privacySettings.readreceipts = value;
  };
  fetchBlocklist = async () => [...this.blocked];
  updateBlockStatus = async (jid: string, action: 'block' | 'unblock') => {
    this.blocked = this.blocked.filter((j) => j !== jid);
    if (action === 'block') this.blocked.push(jid);
  };
  /** Profile changes in call order. */
  profileCalls: [string, unknown][] = [];
  updateProfileName = async (name: string) => void this.profileCalls.push(['name', name]);
  updateProfileStatus = async (status: string) => void this.profileCalls.push(['status', status]);
  updateProfilePicture = async (jid: string, content: unknown) =>
    void this.profileCalls.push(['picture', { jid, content }]);
  /** Channel calls: no channel exists (metadata null); follow and unfollow resolve. */
  newsletterMetadata = async (_type: 'invite' | 'jid', _key: string) => null;
  newsletterFollow = async (_jid: string): Promise<unknown> => ({});
  newsletterUnfollow = async (_jid: string): Promise<unknown> => ({});
  /** Every `chatModify` call: the modification and the chat JID (docs/decisions/0043-chat-actions-and-star.md). */
  readonly chatModifications: { mod: ChatModification; jid: string }[] = [];
  chatModify = async (mod: ChatModification, jid: string) => void this.chatModifications.push({ mod, jid });
  /** The business profile the platform answers for the account (docs/decisions/0045-business-labels.md); none: personal. */
  businessProfile: WABusinessProfile | undefined = undefined;
  getBusinessProfile = async (_jid: string): Promise<WABusinessProfile | undefined> => this.businessProfile;
  /** Every node sent with `sendNode` (media re-upload requests); `onSendNode` may answer one. */
  readonly sentNodes: BinaryNode[] = [];
  onSendNode: (node: BinaryNode) => void = () => undefined;
  sendNode = async (node: BinaryNode) => {
    this.sentNodes.push(node);
    this.onSendNode(node);
  };
}

/**
 * The `ws` WebSocket under a fake socket: open until closed (a closing handshake answered) or terminated (destroyed,
 * `onTerminate` told); its `close` event is emitted once, at once.
 */
export class FakeWebSocket {
  /** `ws`'s `readyState`: 1 open, 3 closed. */
  readyState = 1;
  readonly #events = new EventEmitter();
  readonly #onTerminate: () => void;

  constructor(onTerminate: () => void) {
    this.#onTerminate = onTerminate;
  }

  once(event: 'close', listener: () => void): void {
    this.#events.once(event, listener);
  }

  /** Destroys the WebSocket with no closing handshake (`ws` `terminate`). */
  terminate(): void {
    this.#onTerminate();
    this.close();
  }

  /** Closes the WebSocket (a no-op once closed). */
  close(): void {
    if (this.readyState === 3) return;
    this.readyState = 3;
    this.#events.emit('close');
  }
}

/** A factory that records every socket it makes; `onCreate` runs right after creation (e.g. to open it). */
export function fakeFactory(onCreate?: (sock: FakeSocket, index: number) => void): {
  factory: SocketFactory;
  sockets: FakeSocket[];
} {
  const sockets: FakeSocket[] = [];
  const factory: SocketFactory = (config) => {
    const sock = new FakeSocket(config);
    sockets.push(sock);
    if (onCreate) setImmediate(() => onCreate(sock, sockets.length - 1));
    return sock;
  };
  return { factory, sockets };
}
