/**
 * The history sync a phone runs for a newly linked companion: after the companion's first login the phone
 * sends it, from the account's own JID, a protocolMessage HISTORY_SYNC_NOTIFICATION of type INITIAL_BOOTSTRAP
 * whose HistorySync travels inline (`initialHistBootstrapInlinePayload`, zlib-deflated — the companion
 * announced `inlineInitialPayloadInE2EeMsg` at registration; Baileys' Utils/history.js
 * downloadAndProcessHistorySyncNotification inflates it, so no media download is involved). Baileys' chats.js
 * waits for this notification (up to 20 s, buffering every event) before it goes online; process-message.js
 * accepts it only from its own account. The history holds the account's past conversations
 * (`User.history`, set with `POST /control/history`), each keyed by the peer's LID with its phone JID beside it
 * (`pnJid`, and in `phoneNumberToLidMappings`) as the platform sends LID-migrated chats; a peer who hides its
 * phone is named by LID only.
 */
import { randomBytes } from 'node:crypto';
import { deflateSync } from 'node:zlib';
import { proto } from 'baileys';
import { type Accounts, type Device, lidJid, phoneJid, type User } from '../model/accounts.ts';
import type { SimContext } from '../server/session.ts';
import { encryptToDevices, incomingMessageNode } from '../signal/index.ts';
import { deliver } from './delivery.ts';
import { newMessageId } from './send.ts';

/** The HistorySync conversations of `user`'s past chats (peers no longer defined are left out). */
function conversations(user: User, accounts: Accounts): proto.IConversation[] {
  const out: proto.IConversation[] = [];
  for (const chat of user.history ?? []) {
    const peer = accounts.get(chat.peer);
    if (!peer) continue;
    const id = lidJid(peer.lid);
    const conversation: proto.IConversation = {
      id,
      lidJid: id,
      messages: chat.messages.map((m, index) => ({
        msgOrderId: chat.messages.length - index,
        message: {
          key: { remoteJid: id, fromMe: m.fromMe, id: m.id },
          message: { conversation: m.text },
          messageTimestamp: m.timestamp,
          ...(m.fromMe ? { status: proto.WebMessageInfo.Status.DELIVERY_ACK } : { pushName: peer.pushName }),
        },
      })),
    };
    if (!peer.hidesPhone) conversation.pnJid = phoneJid(peer.phone);
    if (chat.name) conversation.name = chat.name;
    const newest = chat.messages[0];
    if (newest) conversation.conversationTimestamp = newest.timestamp;
    out.push(conversation);
  }
  return out;
}

/** The notification message with the account's INITIAL_BOOTSTRAP history inline. */
export function historyBootstrapMessage(user: User, accounts: Accounts): proto.IMessage {
  const chats = conversations(user, accounts);
  const mappings = (user.history ?? []).flatMap((chat) => {
    const peer = accounts.get(chat.peer);
    return peer && !peer.hidesPhone ? [{ pnJid: phoneJid(peer.phone), lidJid: lidJid(peer.lid) }] : [];
  });
  const history = proto.HistorySync.encode({
    syncType: proto.HistorySync.HistorySyncType.INITIAL_BOOTSTRAP,
    conversations: chats,
    phoneNumberToLidMappings: mappings,
    pushnames: [{ id: phoneJid(user.phone), pushname: user.pushName }],
    progress: 100,
    chunkOrder: 0,
  }).finish();
  return {
    protocolMessage: {
      type: proto.Message.ProtocolMessage.Type.HISTORY_SYNC_NOTIFICATION,
      historySyncNotification: {
        syncType: proto.HistorySync.HistorySyncType.INITIAL_BOOTSTRAP,
        initialHistBootstrapInlinePayload: deflateSync(history),
        chunkOrder: 0,
        progress: 100,
      },
    },
  };
}

/**
 * The phone's APP_STATE_SYNC_KEY_SHARE for a new companion: the account's app state key (made on first use), so
 * the companion can send app state patches (a new push name, server/account-iq.ts). Baileys' process-message.js
 * stores the key and makes it `creds.myAppStateKeyId`.
 */
export function appStateKeyShareMessage(user: User): proto.IMessage {
  if (!user.appStateKey) user.appStateKey = { id: randomBytes(6), data: randomBytes(32) };
  const { id, data } = user.appStateKey;
  return {
    protocolMessage: {
      type: proto.Message.ProtocolMessage.Type.APP_STATE_SYNC_KEY_SHARE,
      appStateSyncKeyShare: {
        keys: [
          {
            keyId: { keyId: id },
            keyData: {
              keyData: data,
              fingerprint: { rawId: 1, currentIndex: 0, deviceIndexes: [0] },
              timestamp: Date.now(),
            },
          },
        ],
      },
    },
  };
}

/** Encrypts `message` from the phone to `device` and delivers it. */
async function sendFromPhone(
  ctx: SimContext,
  user: User,
  device: Device,
  message: proto.IMessage,
): Promise<void> {
  const jid = phoneJid(user.phone, device.id);
  const [ciphertext] = await ctx.signalQueue.run(user.phone, () =>
    encryptToDevices(user.handset, [{ jid, ...(device.keys ? { keys: device.keys } : {}) }], message, jid),
  );
  if (!ciphertext) return;
  deliver(
    device,
    incomingMessageNode({
      id: newMessageId(),
      from: phoneJid(user.phone),
      pushName: user.pushName,
      enc: [ciphertext.enc],
      attrs: { category: 'peer' },
    }),
  );
}

/** Sends the bootstrap, then the app state key share, to `device` once (its first login after linking). */
export async function sendHistoryBootstrap(ctx: SimContext, user: User, device: Device): Promise<void> {
  if (device.historySent || !device.keys) return;
  device.historySent = true;
  await sendFromPhone(ctx, user, device, historyBootstrapMessage(user, ctx.accounts));
  await sendFromPhone(ctx, user, device, appStateKeyShareMessage(user));
}

/** Sends the bootstrap at every companion's first login. */
export function startHistorySync(ctx: SimContext): void {
  ctx.events.on('login', ({ user, device }: { user: User; device: Device }) => {
    sendHistoryBootstrap(ctx, user, device).catch((error: unknown) =>
      ctx.log.warn({ err: error, phone: user.phone, device: device.id }, 'history bootstrap not sent'),
    );
  });
}
