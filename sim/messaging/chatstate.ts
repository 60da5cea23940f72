/**
 * Chat state from linked devices (Baileys Socket/chats.js `sendPresenceUpdate`: `<chatstate from to>` with
 * `<composing/>`, `<composing media="audio"/>` or `<paused/>`): the simulated user the stanza is addressed to
 * gets an inbox entry of type `chatstate` with `state` composing, recording or paused — what its phone would show
 * in the chat. Availability (`<presence type>`) is not tied to a chat and is not recorded.
 */
import type { InboxEntry } from '../model/inbox.ts';
import type { DeviceStanza, SimContext } from '../server/session.ts';

/** Subscribes the chat-state relay to the context's device stanzas. */
export function startChatstateRelay(ctx: SimContext): void {
  ctx.events.on('stanza', ({ user, device, node }: DeviceStanza) => {
    if (node.tag !== 'chatstate' || !node.attrs.to) return;
    const target = ctx.accounts.resolve(node.attrs.to);
    const child = Array.isArray(node.content) ? node.content[0] : undefined;
    if (!target || target.user === user || !child) return;
    const state =
      child.tag === 'paused' ? 'paused' : child.attrs?.media === 'audio' ? 'recording' : 'composing';
    const entry: InboxEntry = {
      id: `chatstate-${Date.now()}`,
      from: user.phone,
      fromDevice: device.id,
      type: 'chatstate',
      timestamp: new Date().toISOString(),
      state,
    };
    target.user.inbox.push(entry);
    ctx.events.emit('inbox', { user: target.user, entry });
  });
}
