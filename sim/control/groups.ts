/**
 * Control API, groups: a simulated user creates a group (so a linked account can be a plain member of a group
 * it did not create; its devices get the `w:gp2` create notification), a group's state, and a member's text to a group (`POST /control/messages` with
 * `groupJid`, see control/messaging.ts, which hands it to {@link sendGroupText}).
 */
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { notifyGroupCreated } from '../messaging/group-notify.ts';
import { sendGroupMessage } from '../messaging/group-send.ts';
import type { SendResult } from '../messaging/send.ts';
import type { User } from '../model/accounts.ts';
import { type Group, groupsOf, MAX_SUBJECT } from '../model/groups.ts';
import type { SimContext } from '../server/session.ts';
import { ControlError } from './errors.ts';
import { Phone } from './schemas.ts';

const CreateGroup = Type.Object(
  {
    creator: Phone,
    subject: Type.String({ minLength: 1, maxLength: MAX_SUBJECT }),
    participants: Type.Array(Phone, { minItems: 1, maxItems: 256 }),
  },
  { additionalProperties: false },
);

const GroupParams = Type.Object({
  jid: Type.String({ pattern: '^[0-9]{1,40}(-[0-9]{1,40})?@g\\.us$' }),
});

/**
 * The JSON view of a group: members with their role (`superadmin`, `admin`, `member`), times ISO 8601, the
 * description ('' when none), `announce`, `locked` and `ephemeral` (seconds, 0 off).
 */
export function groupView(group: Group) {
  return {
    jid: group.jid,
    subject: group.subject,
    creator: group.creator.phone,
    creation: new Date(group.creation * 1000).toISOString(),
    inviteCode: group.inviteCode,
    description: group.description,
    announce: group.announce,
    locked: group.locked,
    ephemeral: group.ephemeral,
    participants: [...group.members.values()].map((m) => ({
      phone: m.user.phone,
      lid: m.user.lid,
      role: m.role,
    })),
  };
}

/**
 * User `sender` sends `message` to group `groupJid` (messaging/group-send.ts). `to`, when given, must be a
 * member (the account the caller expects to receive it).
 * @throws ControlError 404 for an unknown group, 409 when the sender or `to` is not a member or no member
 *   has a linked device.
 */
export async function sendGroupText(
  ctx: SimContext,
  sender: User,
  groupJid: string,
  message: Parameters<typeof sendGroupMessage>[3],
  to?: User,
): Promise<SendResult> {
  const group = groupsOf(ctx.accounts).get(groupJid);
  if (!group) throw new ControlError(404, `groupJid: no simulated group ${groupJid}`);
  if (!group.members.has(sender.phone)) {
    throw new ControlError(409, `from: ${sender.phone} is not a member of ${groupJid}`);
  }
  if (to && !group.members.has(to.phone)) {
    throw new ControlError(409, `to: ${to.phone} is not a member of ${groupJid}`);
  }
  const result = await sendGroupMessage(ctx.signalQueue, sender, group, message);
  if (result.devices === 0) throw new ControlError(409, `groupJid: no other member has a linked device`);
  return result;
}

/** Registers the group routes. */
export function registerGroupRoutes(app: FastifyInstance, ctx: SimContext): void {
  app.post<{ Body: Static<typeof CreateGroup> }>(
    '/control/groups',
    { schema: { body: CreateGroup } },
    async (request, reply) => {
      const { creator, subject, participants } = request.body;
      const owner = ctx.accounts.require(creator, 'creator');
      if (!owner.registered) throw new ControlError(400, `creator: ${creator} is not registered`);
      const members = participants.map((phone, i) => {
        const user = ctx.accounts.require(phone, `participants.${i}`);
        if (!user.registered) throw new ControlError(400, `participants.${i}: ${phone} is not registered`);
        return user;
      });
      const group = groupsOf(ctx.accounts).create(owner, subject, members);
      notifyGroupCreated(group);
      return reply.status(201).send(groupView(group));
    },
  );

  app.get<{ Params: Static<typeof GroupParams> }>(
    '/control/groups/:jid',
    { schema: { params: GroupParams } },
    async (request) => groupView(groupsOf(ctx.accounts).require(request.params.jid, 'jid')),
  );
}
