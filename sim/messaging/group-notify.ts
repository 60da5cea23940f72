/**
 * Group notifications the platform sends to members' devices (`<notification type="w:gp2">`, read by Baileys'
 * lib/Socket/messages-recv.js handleGroupNotification). Modelled: `<create>` when a group is made — every
 * linked companion of every member but the device that made it learns the group (Baileys emits `groups.upsert`
 * and a GROUP_CREATE stub). The acting member is named by LID (`participant`) with its phone JID beside it
 * (`participant_pn`; none for a user who hides its phone). Devices with no open socket get it at their next login,
 * as offline stanzas. Changes to a group (participants, subject, settings) go to every member companion with
 * {@link notifyGroupChange}.
 */
import type { BinaryNode } from 'baileys';
import type { Device, User } from '../model/accounts.ts';
import { lidJid, shownPhoneAttr } from '../model/accounts.ts';
import type { Group } from '../model/groups.ts';
import { groupNode } from '../server/group-node.ts';
import { deliver } from './delivery.ts';
import { newMessageId } from './send.ts';

/**
 * Sends the `w:gp2` `<create>` notification of `group` to the member companions except `maker` (the device that
 * made it, if a device did); returns how many devices it was sent or queued to.
 */
export function notifyGroupCreated(group: Group, maker?: Device): number {
  const creator = group.creator;
  let devices = 0;
  for (const { user } of group.members.values()) {
    for (const device of user.devices.values()) {
      if (device.id === 0 || !device.linked || device === maker) continue;
      deliver(device, {
        tag: 'notification',
        attrs: {
          id: newMessageId(),
          from: group.jid,
          type: 'w:gp2',
          t: String(group.creation),
          participant: lidJid(creator.lid),
          ...shownPhoneAttr('participant_pn', creator),
          notify: creator.pushName,
        },
        content: [{ tag: 'create', attrs: { reason: 'new' }, content: [groupNode(group)] }],
      });
      devices++;
    }
  }
  return devices;
}

/**
 * Sends one `w:gp2` notification of a change made by `actor` (`participant` = its LID, `participant_pn` = its
 * phone JID) with `children` (`<add>`, `<remove>`, `<promote>`, `<demote>`, `<subject>`, `<description>`,
 * `<announcement>`, `<locked>`, `<ephemeral>`, … as model/group-admin.ts builds them) to every linked companion
 * of every member, the actor's own included, and of `alsoTo` (users just removed). Returns how many devices it
 * was sent or queued to.
 */
export function notifyGroupChange(
  group: Group,
  actor: User,
  children: BinaryNode[],
  alsoTo: readonly User[] = [],
  now = Date.now(),
): number {
  if (children.length === 0) return 0;
  const users = new Set([...[...group.members.values()].map((m) => m.user), ...alsoTo]);
  let devices = 0;
  for (const user of users) {
    for (const device of user.devices.values()) {
      if (device.id === 0 || !device.linked) continue;
      deliver(device, {
        tag: 'notification',
        attrs: {
          id: newMessageId(),
          from: group.jid,
          type: 'w:gp2',
          t: String(Math.floor(now / 1000)),
          participant: lidJid(actor.lid),
          ...shownPhoneAttr('participant_pn', actor),
          notify: actor.pushName,
          addressing_mode: 'lid',
        },
        content: children,
      });
      devices++;
    }
  }
  return devices;
}
