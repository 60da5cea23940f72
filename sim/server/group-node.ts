/**
 * The `<group>` node the platform sends in `w:g2` answers and `w:gp2` notifications, as Baileys 7's
 * lib/Socket/groups.js extractGroupMetadata reads it: a LID-addressed group (`addressing_mode="lid"`), the
 * creator and subject owner by LID with their phone JIDs beside them (`creator_pn`, `s_o_pn`), times in Unix
 * seconds, one `<participant jid=<lid> phone_number=<phone> type?>` per member (`type` absent for a plain member),
 * then the settings that are on (description, announcement, locked, ephemeral). A user who hides its phone
 * (`hidesPhone`) is named by LID alone: no phone JID beside it.
 */
import type { BinaryNode } from 'baileys';
import { lidJid, shownPhoneAttr, type User } from '../model/accounts.ts';
import type { Group } from '../model/groups.ts';

/** The `<participant>` of one member, LID-addressed with the phone number beside it (none when hidden). */
function participantNode(user: User, role: string): BinaryNode {
  const attrs: Record<string, string> = { jid: lidJid(user.lid), ...shownPhoneAttr('phone_number', user) };
  if (role !== 'member') attrs.type = role;
  return { tag: 'participant', attrs };
}

/** The `<group>` node of `group` (Baileys extractGroupMetadata reads every attribute written here). */
export function groupNode(group: Group): BinaryNode {
  return {
    tag: 'group',
    attrs: {
      id: group.jid.split('@')[0] ?? group.jid,
      subject: group.subject,
      s_t: String(group.subjectTime),
      s_o: lidJid(group.subjectOwner.lid),
      ...shownPhoneAttr('s_o_pn', group.subjectOwner),
      creation: String(group.creation),
      creator: lidJid(group.creator.lid),
      ...shownPhoneAttr('creator_pn', group.creator),
      size: String(group.members.size),
      addressing_mode: 'lid',
    },
    content: [...group.members.values()]
      .map((m) => participantNode(m.user, m.role))
      .concat(settingNodes(group)),
  };
}

/**
 * The setting children of a `<group>`: `<description id t participant participant_pn><body>…</body>`,
 * `<announcement/>`, `<locked/>`, `<ephemeral expiration/>`, each only when set (extractGroupMetadata reads
 * `desc`, `announce`, `restrict` and `ephemeralDuration` from them).
 */
function settingNodes(group: Group): BinaryNode[] {
  const nodes: BinaryNode[] = [];
  if (group.description !== '') {
    const owner = group.descriptionOwner ?? group.creator;
    nodes.push({
      tag: 'description',
      attrs: {
        id: group.descriptionId ?? '',
        t: String(group.descriptionTime ?? group.creation),
        participant: lidJid(owner.lid),
        ...shownPhoneAttr('participant_pn', owner),
      },
      content: [{ tag: 'body', attrs: {}, content: Buffer.from(group.description, 'utf8') }],
    });
  }
  if (group.announce) nodes.push({ tag: 'announcement', attrs: {} });
  if (group.locked) nodes.push({ tag: 'locked', attrs: {} });
  if (group.ephemeral > 0) nodes.push({ tag: 'ephemeral', attrs: { expiration: String(group.ephemeral) } });
  return nodes;
}
