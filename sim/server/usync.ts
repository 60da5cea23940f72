/**
 * The `usync` iq as Baileys 7 builds it (Socket/socket.js executeUSyncQuery) and parses it
 * (WAUSync/USyncQuery.js parseUSyncQueryResult and the protocol parsers): a `<query>` naming protocols
 * (devices, contact, lid, status, disappearing_mode, …) and a `<list>` of `<user jid>` or
 * `<user><contact>+phone</contact></user>`. The answer echoes each user with one child per protocol:
 * `business` (the verified name, server/business.ts) and `status` (the about text) included.
 */
import { type BinaryNode, getBinaryNodeChild, getBinaryNodeChildren } from 'baileys';
import { type Accounts, lidJid, phoneJid, type User } from '../model/accounts.ts';
import { businessNode } from './business.ts';

function contactPhone(userNode: BinaryNode): string | undefined {
  const contact = getBinaryNodeChild(userNode, 'contact');
  const content = contact?.content;
  const text =
    typeof content === 'string'
      ? content
      : content instanceof Uint8Array
        ? Buffer.from(content).toString()
        : undefined;
  return text?.replace(/^\+/, '');
}

function protocolNode(
  protocol: string,
  user: User | undefined,
  phone: string | undefined,
  accounts: Accounts,
  byLid: boolean,
): BinaryNode | undefined {
  switch (protocol) {
    case 'devices': {
      const devices = user ? accounts.linkedDevices(user) : [];
      return {
        tag: 'devices',
        attrs: {},
        content: [
          {
            tag: 'device-list',
            attrs: {},
            content: devices.map((d): BinaryNode => {
              const attrs: Record<string, string> = { id: String(d.id) };
              if (d.id !== 0) attrs['key-index'] = String(d.keyIndex);
              return { tag: 'device', attrs };
            }),
          },
        ],
      };
    }
    case 'contact': {
      const known = user?.registered === true;
      return {
        tag: 'contact',
        attrs: { type: known ? 'in' : 'out' },
        content: phone ? `+${phone}` : undefined,
      };
    }
    case 'lid':
      // The LID of a user asked for by phone; a user asked for by LID has no other LID to give.
      return user && !byLid ? { tag: 'lid', attrs: { val: lidJid(user.lid) } } : { tag: 'lid', attrs: {} };
    case 'status':
      // The about text (Baileys USyncStatusProtocol: content = the text, `t` = when it was set).
      return user?.registered && user.about !== undefined
        ? { tag: 'status', attrs: { t: '0' }, content: user.about }
        : { tag: 'status', attrs: { t: '0' } };
    case 'business':
      return businessNode(user);
    case 'disappearing_mode':
      return { tag: 'disappearing_mode', attrs: { duration: '0', t: '0' } };
    default:
      return undefined;
  }
}

/** Builds the `<usync>` answer for a `<usync>` query. */
export function usyncResult(usync: BinaryNode, accounts: Accounts): BinaryNode {
  const query = getBinaryNodeChild(usync, 'query');
  const protocols = Array.isArray(query?.content) ? query.content.map((p) => p.tag) : [];
  const users = getBinaryNodeChildren(getBinaryNodeChild(usync, 'list'), 'user').map(
    (userNode): BinaryNode => {
      const phone = contactPhone(userNode);
      let jid = userNode.attrs.jid;
      let user: User | undefined;
      let byLid = false;
      if (jid) {
        const resolved = accounts.resolve(jid);
        user = resolved?.user;
        byLid = resolved?.addressing === 'lid';
      } else if (phone) {
        user = accounts.get(phone);
        jid = phoneJid(phone);
      }
      const content = protocols
        .map((p) => protocolNode(p, user, phone ?? user?.phone, accounts, byLid))
        .filter((n): n is BinaryNode => n !== undefined);
      return { tag: 'user', attrs: { jid: jid ?? '' }, content };
    },
  );
  return {
    tag: 'usync',
    attrs: {
      sid: usync.attrs.sid ?? '',
      mode: usync.attrs.mode ?? 'query',
      context: usync.attrs.context ?? '',
      index: '0',
      last: 'true',
    },
    content: [
      { tag: 'result', attrs: {}, content: protocols.map((p) => ({ tag: p, attrs: {} })) },
      { tag: 'list', attrs: {}, content: users },
    ],
  };
}
