/**
 * What a connection does after the Noise finish, decided by its ClientPayload as Baileys'
 * Utils/validate-connection.js builds it: a payload with `devicePairingData` is a registration (the socket
 * waits for its QR to be scanned, see pairing/pairing.ts); one with `username` + `device` is a login with
 * stored credentials, accepted with `<success>` when that device is linked and the Noise static key is the one
 * it registered, refused with `<failure reason=401>` otherwise.
 */
import { EventEmitter } from 'node:events';
import { type BinaryNode, getBinaryNodeChild, getBinaryNodeChildren, type proto } from 'baileys';
import type { Logger } from 'pino';
import type { MediaServer } from '../media/server.ts';
import { KeyedQueue, takeOffline } from '../messaging/delivery.ts';
import type { MediaRetryRecord } from '../messaging/media-retry.ts';
import { type Accounts, type Device, lidJid, SERVER_JID, type User } from '../model/accounts.ts';
import { loginRefusal, nackFor } from '../model/restrictions.ts';
import type { CertificateChain } from '../noise/certificates.ts';
import type { Pairing } from '../pairing/pairing.ts';
import { appStatePatchIq } from './app-state.ts';
import { ConnectionLog } from './attempts.ts';
import type { Connection, StanzaHandler } from './connection.ts';
import { answerIq, iqReply } from './iq.ts';
import { deviceKeysFromPairing } from './keys.ts';

/** A stanza a logged-in device sent, as published on {@link SimContext.events} under `stanza` (or `iq`). */
export interface DeviceStanza {
  user: User;
  device: Device;
  connection: Connection;
  node: BinaryNode;
}

/** Shared state of one simulator. */
export interface SimContext {
  accounts: Accounts;
  pairing: Pairing;
  chain: CertificateChain;
  log: Logger;
  /** Serializes Signal operations per user phone (sessions are read-modify-write). */
  signalQueue: KeyedQueue;
  /**
   * `stanza` (DeviceStanza) for every message, receipt, presence and chatstate a device sends; `iq`
   * (DeviceStanza) for every iq it sends (before it is answered);
   * `login` ({ user, device, connection }) when a device logs in; `unlink` ({ user, device }).
   */
  events: EventEmitter;
  /** The HTTPS media server (media/server.ts), when started. */
  media?: MediaServer;
  /** Connection attempts since start (GET /control/connections). */
  connections: ConnectionLog;
  /** Media re-upload requests devices sent, oldest first (messaging/media-retry.ts, GET /control/media/retries). */
  mediaRetries: MediaRetryRecord[];
}

function now(): string {
  return String(Math.floor(Date.now() / 1000));
}

/** Unlinks a companion: marks it unlinked, forgets its keys and closes its sockets with a 401 stream error. */
export function unlinkDevice(ctx: SimContext, user: User, device: Device): void {
  device.linked = false;
  delete device.keys;
  for (const socket of [...device.sockets]) socket.streamError(401);
  ctx.events.emit('unlink', { user, device });
}

/**
 * A socket waiting to be paired; it answers keep-alive pings and the iqs of pairing by code
 * (pairing/link-code.ts); the pair-device result needs no answer.
 */
function registrationSession(
  ctx: SimContext,
  connection: Connection,
  payload: proto.ClientPayload,
  noiseKey: Buffer,
): StanzaHandler {
  const data = payload.devicePairingData;
  if (!data) throw new Error('registration without devicePairingData');
  const registration = ctx.pairing.start({ connection, noiseKey, keys: deviceKeysFromPairing(data) });
  ctx.log.info({ connection: connection.id }, 'registration socket: pairing refs sent');
  return {
    async onStanza(node) {
      if (node.tag === 'iq' && node.attrs.type === 'get') connection.send(iqReply(node, {}));
      else if (node.tag === 'iq' && node.attrs.type === 'set') {
        // Pairing by code (pairing/link-code.ts): companion_hello and companion_finish.
        const answer = ctx.pairing.linkCodes.onCompanionIq(registration, node);
        if (answer) connection.send(answer);
      }
    },
    onClose() {
      ctx.pairing.end(registration);
    },
  };
}

/**
 * Acks a message, receipt or notification as the platform's server does once it took the stanza over; with
 * `error`, a nack (`<ack error=N>`): the server refused the stanza (Baileys' handleBadAck reads `error`).
 */
function ack(connection: Connection, node: BinaryNode, error?: number): void {
  const attrs: Record<string, string> = { id: node.attrs.id ?? '', class: node.tag, t: now() };
  if (error !== undefined) attrs.error = String(error);
  if (node.attrs.to) attrs.from = node.attrs.to;
  if (node.tag === 'receipt' && node.attrs.type) attrs.type = node.attrs.type;
  if (node.attrs.participant) attrs.participant = node.attrs.participant;
  connection.send({ tag: 'ack', attrs });
}

/** Clears the messages a client ack or receipt names (`id` and any `<list><item id/>`). */
function acknowledged(connection: Connection, node: BinaryNode): void {
  if (node.attrs.id) connection.acknowledge(node.attrs.id);
  for (const item of getBinaryNodeChildren(getBinaryNodeChild(node, 'list'), 'item')) {
    if (item.attrs.id) connection.acknowledge(item.attrs.id);
  }
}

function loginSession(
  ctx: SimContext,
  connection: Connection,
  payload: proto.ClientPayload,
  noiseKey: Buffer,
): StanzaHandler | undefined {
  const phone = String(payload.username ?? '');
  const user = ctx.accounts.get(phone);
  const device = user?.devices.get(payload.device ?? 0);
  if (!user || !device || device.id === 0 || !device.linked || !device.noiseKey?.equals(noiseKey)) {
    ctx.log.info(
      { connection: connection.id, phone, device: payload.device },
      'login refused: device not linked',
    );
    connection.failure(401);
    return undefined;
  }
  const refusal = loginRefusal(user);
  if (refusal !== undefined) {
    ctx.log.info({ connection: connection.id, phone, code: refusal }, 'login refused: account blocked');
    connection.failure(refusal);
    return undefined;
  }
  for (const other of [...device.sockets]) {
    ctx.log.info({ connection: other.id, replacedBy: connection.id }, 'socket replaced by a newer login');
    other.streamError(440);
  }
  device.sockets.add(connection);
  connection.send({
    tag: 'success',
    attrs: {
      t: now(),
      props: '1',
      abprops: '1',
      location: 'sim',
      lid: lidJid(user.lid, device.id),
      creation: now(),
    },
  });
  const queued = takeOffline(device);
  // The platform marks what it hands over from a device's offline queue (`offline`): Baileys upserts such messages as
  // `append` rather than `notify`, and a message redelivered after a lost acknowledgement comes this way.
  for (const node of queued) connection.sendMessage({ ...node, attrs: { ...node.attrs, offline: '1' } });
  connection.send({
    tag: 'ib',
    attrs: { from: SERVER_JID },
    content: [{ tag: 'offline', attrs: { count: String(queued.length) } }],
  });
  ctx.connections.loggedIn(connection.id);
  ctx.log.info({ connection: connection.id, phone, device: device.id }, 'device logged in');
  ctx.events.emit('login', { user, device, connection });
  const iqContext = {
    accounts: ctx.accounts,
    user,
    device,
    unlinkDevice: (u: User, d: Device) => unlinkDevice(ctx, u, d),
    ...(ctx.media ? { media: ctx.media } : {}),
  };
  return {
    async onStanza(node) {
      switch (node.tag) {
        case 'iq':
          if (node.attrs.xmlns === 'w:p' && connection.silenced) return;
          ctx.events.emit('iq', { user, device, connection, node } satisfies DeviceStanza);
          connection.send(
            iqReply(
              node,
              node.attrs.xmlns === 'w:sync:app:state' && node.attrs.type === 'set'
                ? await appStatePatchIq(node, user)
                : answerIq(node, iqContext),
            ),
          );
          return;
        case 'message': {
          const nack = nackFor(ctx.accounts, user, node.attrs.to ?? '', Date.now());
          if (nack !== undefined) {
            ctx.log.info({ connection: connection.id, id: node.attrs.id, error: nack }, 'message nacked');
            ack(connection, node, nack);
            return;
          }
          // Taken and delivered either way; with `withhold-acks` the ack is lost on the way to the client, with
          // `slow-acks` it leaves later (send is a no-op on a connection closed by then).
          if (!connection.acksWithheld) {
            const delayMs = connection.ackDelayMs;
            if (delayMs > 0) setTimeout(() => ack(connection, node), delayMs).unref();
            else ack(connection, node);
          }
          ctx.events.emit('stanza', { user, device, connection, node } satisfies DeviceStanza);
          return;
        }
        case 'receipt':
          if (node.tag === 'receipt') acknowledged(connection, node);
          ack(connection, node);
          ctx.events.emit('stanza', { user, device, connection, node } satisfies DeviceStanza);
          return;
        case 'call':
          // A device's call signalling (a reject, control/calls.ts): the server acks it (Baileys' rejectCall
          // waits for the ack of its query).
          ack(connection, node);
          ctx.events.emit('stanza', { user, device, connection, node } satisfies DeviceStanza);
          return;
        case 'presence':
        case 'chatstate':
          ctx.events.emit('stanza', { user, device, connection, node } satisfies DeviceStanza);
          return;
        case 'ack':
          acknowledged(connection, node);
          return;
        default:
          // ib (unified_session, offline_batch): nothing to answer.
          return;
      }
    },
    onClose() {
      device.sockets.delete(connection);
      device.offline.unshift(...connection.takeUnacked());
    },
  };
}

/** Builds the session of a connection from its client payload (the connection's SessionFactory). */
export function createSession(
  ctx: SimContext,
  connection: Connection,
  payload: proto.ClientPayload,
  noiseKey: Buffer,
): StanzaHandler {
  if (payload.devicePairingData) return registrationSession(ctx, connection, payload, noiseKey);
  return loginSession(ctx, connection, payload, noiseKey) ?? { async onStanza() {}, onClose() {} };
}

/** A fresh context. */
export function createContext(
  parts: Omit<SimContext, 'events' | 'signalQueue' | 'connections' | 'mediaRetries'>,
): SimContext {
  return {
    ...parts,
    mediaRetries: [],
    events: new EventEmitter(),
    signalQueue: new KeyedQueue(),
    connections: new ConnectionLog(),
  };
}
