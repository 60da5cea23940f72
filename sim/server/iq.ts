/**
 * Answers to the iq queries a logged-in Baileys 7 socket sends (Socket/socket.js, chats.js, messages-send.js),
 * by `xmlns`. Every query gets a well-formed answer — modelled ones a `result` shaped as Baileys parses it,
 * the rest an `error` 501 (feature-not-implemented), which Baileys' assertNodeErrorFree turns into an
 * immediate error instead of a query time-out.
 */
import { type BinaryNode, getBinaryNodeChild, getBinaryNodeChildren } from 'baileys';
import { type MediaConn, mediaConnNode } from '../media/server.ts';
import type { Accounts, Device, User } from '../model/accounts.ts';
import { SERVER_JID } from '../model/accounts.ts';
import {
  type DeviceKeys,
  KeyNodeError,
  mergePreKeyUpload,
  parsePreKeyUpload,
  parseSignedPreKey,
} from '../signal/index.ts';
import { blocklistIq, ownPictureIq, privacyIq, statusIq } from './account-iq.ts';
import { businessProfileAnswer } from './business.ts';
import { groupIq } from './groups.ts';
import { keyBundleNode, keysDigestNode } from './keys.ts';
import { answerMex } from './mex.ts';
import { answerNewsletterMex } from './newsletter-mex.ts';
import { profilePictureAnswer } from './profile.ts';
import { usyncResult } from './usync.ts';

/** Who is asking, and what the iq handlers may touch. */
export interface IqContext {
  accounts: Accounts;
  user: User;
  device: Device;
  /** Unlinks the asking device and closes its sockets (remove-companion-device). */
  unlinkDevice(user: User, device: Device): void;
  /** The media server, when the simulator runs one: answers `media_conn` (media/server.ts). */
  media?: { mediaConn(): MediaConn };
}

/** An iq answer: content of a `result`, or an error code and text. */
export type IqAnswer = { content?: BinaryNode[] } | { error: { code: number; text: string } };

const notImplemented: IqAnswer = { error: { code: 501, text: 'feature-not-implemented' } };
const badRequest = (text: string): IqAnswer => ({ error: { code: 400, text } });

/** The AB props the simulator announces (a stable hash so Baileys can cache them). */
const PROPS: BinaryNode = {
  tag: 'props',
  attrs: { protocol: '1', hash: 'sim-props-1', refresh: '86400' },
  content: [{ tag: 'prop', attrs: { config_code: '10518', config_value: 'false' } }],
};

function child(iq: BinaryNode): BinaryNode | undefined {
  return Array.isArray(iq.content) ? iq.content[0] : undefined;
}

function encryptIq(iq: BinaryNode, ctx: IqContext): IqAnswer {
  const first = child(iq);
  if (iq.attrs.type === 'set') {
    if (first?.tag === 'rotate') {
      const skey = getBinaryNodeChild(first, 'skey');
      const keys = ctx.device.keys;
      if (!skey || !keys) return badRequest('rotate needs an skey and uploaded keys');
      try {
        keys.signedPreKey = parseSignedPreKey(skey);
      } catch (error) {
        return badRequest((error as Error).message);
      }
      return {};
    }
    let uploaded: DeviceKeys;
    try {
      uploaded = parsePreKeyUpload(iq);
    } catch (error) {
      if (error instanceof KeyNodeError) return badRequest(error.message);
      throw error;
    }
    const keys = ctx.device.keys;
    if (keys && !keys.identity.equals(uploaded.identity)) return { error: { code: 409, text: 'conflict' } };
    ctx.device.keys = keys ? mergePreKeyUpload(keys, uploaded) : uploaded;
    return {};
  }
  switch (first?.tag) {
    case 'count':
      return { content: [{ tag: 'count', attrs: { value: String(ctx.device.keys?.preKeys.size ?? 0) } }] };
    case 'digest': {
      const keys = ctx.device.keys;
      return keys ? { content: [keysDigestNode(keys)] } : { error: { code: 404, text: 'item-not-found' } };
    }
    case 'key': {
      const users = getBinaryNodeChildren(first, 'user').map((u) =>
        keyBundleNode(ctx.accounts, u.attrs.jid ?? ''),
      );
      return { content: [{ tag: 'list', attrs: {}, content: users }] };
    }
    default:
      return notImplemented;
  }
}

function mdIq(iq: BinaryNode, ctx: IqContext): IqAnswer {
  const first = child(iq);
  if (first?.tag !== 'remove-companion-device') return notImplemented;
  const target = ctx.accounts.resolve(first.attrs.jid ?? '');
  if (!target || target.user !== ctx.user) return badRequest('jid must be a device of this account');
  const device = ctx.user.devices.get(target.device);
  if (!device || device.id === 0) return { error: { code: 404, text: 'item-not-found' } };
  ctx.unlinkDevice(ctx.user, device);
  return {};
}

/** Answers one iq from a logged-in device. */
export function answerIq(iq: BinaryNode, ctx: IqContext): IqAnswer {
  const first = child(iq);
  switch (iq.attrs.xmlns) {
    case 'w:p':
      return {};
    case 'encrypt':
      return encryptIq(iq, ctx);
    case 'usync':
      return first?.tag === 'usync'
        ? { content: [usyncResult(first, ctx.accounts)] }
        : badRequest('usync child missing');
    case 'passive':
    case 'urn:xmpp:whatsapp:dirty':
    case 'w:stats':
    case 'disappearing_mode':
      return {};
    case 'abt':
      return { content: [PROPS] };
    case 'privacy':
      return privacyIq(iq, ctx.user);
    case 'blocklist':
      return blocklistIq(iq, ctx.user, ctx.accounts);
    case 'status':
      return statusIq(iq, ctx.user);
    case 'w:sync:app:state': {
      const collections = getBinaryNodeChildren(getBinaryNodeChild(iq, 'sync'), 'collection');
      return {
        content: [
          {
            tag: 'sync',
            attrs: {},
            content: collections.map((c) => ({
              tag: 'collection',
              attrs: { name: c.attrs.name ?? '', version: c.attrs.version ?? '0' },
            })),
          },
        ],
      };
    }
    case 'md':
      return mdIq(iq, ctx);
    case 'w:g2':
      return groupIq(iq, ctx);
    case 'w:biz': {
      const content = iq.attrs.type === 'get' ? businessProfileAnswer(iq, ctx.accounts) : undefined;
      return content ? { content } : notImplemented;
    }
    case 'w:profile:picture':
      return iq.attrs.type === 'set' ? ownPictureIq(iq, ctx.user) : profilePictureAnswer(iq, ctx.accounts);
    case 'w:m':
      return first?.tag === 'media_conn' && ctx.media
        ? { content: [mediaConnNode(ctx.media.mediaConn())] }
        : notImplemented;
    case 'w:mex': {
      const content = answerNewsletterMex(iq, ctx.accounts, ctx.user) ?? answerMex(iq, ctx.user, Date.now());
      return content ? { content } : notImplemented;
    }
    default:
      return notImplemented;
  }
}

/** Wraps an answer as the iq stanza to send back (`result` or `error`, same id, from the server). */
export function iqReply(iq: BinaryNode, answer: IqAnswer): BinaryNode {
  const attrs: Record<string, string> = { from: SERVER_JID, id: iq.attrs.id ?? '' };
  if ('error' in answer) {
    return {
      tag: 'iq',
      attrs: { ...attrs, type: 'error' },
      content: [{ tag: 'error', attrs: { code: String(answer.error.code), text: answer.error.text } }],
    };
  }
  const node: BinaryNode = { tag: 'iq', attrs: { ...attrs, type: 'result' } };
  if (answer.content) node.content = answer.content;
  return node;
}
