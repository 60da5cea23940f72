/**
 * The history sync a phone runs for a newly linked companion: after the companion's first login the phone
 * sends it, from the account's own JID, a protocolMessage HISTORY_SYNC_NOTIFICATION of type INITIAL_BOOTSTRAP
 * whose HistorySync travels inline (`initialHistBootstrapInlinePayload`, zlib-deflated — the companion
 * announced `inlineInitialPayloadInE2EeMsg` at registration). Baileys' chats.js waits for this notification
 * (up to 20 s, buffering every event) before it goes online; process-message.js accepts it only from its
 * own account. The simulator's history is empty: no conversations, the account's own push name.
 */
import { deflateSync } from 'node:zlib';
import { proto } from 'baileys';
import { type Device, phoneJid, type User } from '../model/accounts.ts';
import type { SimContext } from '../server/session.ts';
import { encryptToDevices, incomingMessageNode } from '../signal/index.ts';
import { deliver } from './delivery.ts';
import { newMessageId } from './send.ts';

/** The notification message with an empty INITIAL_BOOTSTRAP history inline. */
export function historyBootstrapMessage(user: User): proto.IMessage {
  const history = proto.HistorySync.encode({
    syncType: proto.HistorySync.HistorySyncType.INITIAL_BOOTSTRAP,
    conversations: [],
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

/** Sends the bootstrap to `device` once (its first login after linking). */
export async function sendHistoryBootstrap(ctx: SimContext, user: User, device: Device): Promise<void> {
  if (device.historySent || !device.keys) return;
  device.historySent = true;
  const jid = phoneJid(user.phone, device.id);
  const message = historyBootstrapMessage(user);
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

/** Sends the bootstrap at every companion's first login. */
export function startHistorySync(ctx: SimContext): void {
  ctx.events.on('login', ({ user, device }: { user: User; device: Device }) => {
    sendHistoryBootstrap(ctx, user, device).catch((error: unknown) =>
      ctx.log.warn({ err: error, phone: user.phone, device: device.id }, 'history bootstrap not sent'),
    );
  });
}
