import { type BinaryNode, getBinaryNodeChild, getBinaryNodeChildren, isJidGroup } from 'baileys';
import type { GroupUpdate, Jid } from '../../domain/messages.ts';
import type { MappingContext } from './incoming.ts';

/**
 * The platform's group notifications (`<notification type="w:gp2" from=<group> participant=<actor LID>
 * participant_pn=<actor phone> t=<s>>`) as domain `group` events. Baileys turns the same node into message
 * stubs and then `group-participants.update` / `groups.update` (Socket/messages-recv.js handleGroupNotification,
 * Utils/process-message.js), but drops the ephemeral change into a protocol message and keeps only the first
 * child; parley reads the node itself so every change is reported alike. Children read:
 * - `<add>`, `<remove>`, `<promote>`, `<demote>`, `<leave>` with `<participant jid phone_number?>`: an add
 *   whose only participant is the actor is a `join`, such a remove (or `<leave>`) a `leave`;
 * - `<subject subject>`, `<description><body>…</body></description>` (`delete` or no body: cleared);
 * - `<announcement/>` / `<not_announcement/>`, `<locked/>` / `<unlocked/>`;
 * - `<ephemeral expiration=<s>/>` / `<not_ephemeral/>`.
 * Other children (invite, picture, membership requests, …) are not reported. LIDs are resolved to phone JIDs
 * through the `*_pn` / `phone_number` attributes or the LID mapping (docs/decisions/0025-live-engine.md).
 */
export async function groupUpdatesFromNotification(
  node: BinaryNode,
  ctx: MappingContext,
  now: number,
): Promise<GroupUpdate[]> {
  const groupJid = node.attrs.from ?? '';
  if (!isJidGroup(groupJid) || !Array.isArray(node.content)) return [];
  const seconds = Number(node.attrs.t);
  const timestamp = Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : now;
  const resolve = async (jid: string | undefined, alt?: string): Promise<Jid | null> =>
    jid ? (await ctx.resolver.resolve(jid, alt)).jid : null;
  const actor = await resolve(node.attrs.participant, node.attrs.participant_pn);
  const base = { groupJid, actor, participants: [] as Jid[], timestamp };
  const updates: GroupUpdate[] = [];
  for (const child of node.content) {
    switch (child.tag) {
      case 'add':
      case 'remove':
      case 'leave':
      case 'promote':
      case 'demote': {
        const participants: Jid[] = [];
        for (const p of getBinaryNodeChildren(child, 'participant')) {
          const jid = await resolve(p.attrs.jid, p.attrs.phone_number);
          if (jid) participants.push(jid);
        }
        const self = participants.length === 1 && actor !== null && participants[0] === actor;
        let action: GroupUpdate['action'] = child.tag === 'leave' ? 'leave' : child.tag;
        if (self && child.tag === 'add') action = 'join';
        if (self && child.tag === 'remove') action = 'leave';
        updates.push({ ...base, action, participants });
        break;
      }
      case 'subject':
        updates.push({ ...base, action: 'subject', name: child.attrs.subject ?? '' });
        break;
      case 'description': {
        const body = getBinaryNodeChild(child, 'body')?.content;
        const topic = body instanceof Uint8Array ? Buffer.from(body).toString('utf8') : String(body ?? '');
        updates.push({ ...base, action: 'description', topic: child.attrs.delete === 'true' ? '' : topic });
        break;
      }
      case 'announcement':
      case 'not_announcement':
        updates.push({ ...base, action: 'announce', isAnnounce: child.tag === 'announcement' });
        break;
      case 'locked':
      case 'unlocked':
        updates.push({ ...base, action: 'locked', isLocked: child.tag === 'locked' });
        break;
      case 'ephemeral':
      case 'not_ephemeral': {
        const timer = child.tag === 'ephemeral' ? Number(child.attrs.expiration ?? 0) || 0 : 0;
        updates.push({ ...base, action: 'ephemeral', disappearingTimer: timer });
        break;
      }
      default:
        break;
    }
  }
  return updates;
}
