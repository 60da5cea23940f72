/**
 * Control API, group administration by simulated members: a member adds, removes, promotes or demotes
 * participants, joins or leaves (`POST /control/groups/{jid}/participants`), or changes the subject,
 * description, announce, locked or ephemeral setting (`POST /control/groups/{jid}`). The platform's rules apply
 * (model/group-admin.ts) and every change reaches the members' linked devices as a `w:gp2` notification, as a
 * change made from a phone would. Both answer the group's view (`GET /control/groups/{jid}`).
 */
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { notifyGroupChange } from '../messaging/group-notify.ts';
import { phoneJid } from '../model/accounts.ts';
import {
  changeParticipants,
  changeSettings,
  EPHEMERAL_TIMERS,
  GroupRefusal,
  joinGroup,
  leaveGroup,
  MAX_DESCRIPTION,
} from '../model/group-admin.ts';
import { groupsOf, MAX_SUBJECT } from '../model/groups.ts';
import type { SimContext } from '../server/session.ts';
import { ControlError } from './errors.ts';
import { groupView } from './groups.ts';
import { Phone } from './schemas.ts';

const GroupParams = Type.Object({
  jid: Type.String({ pattern: '^[0-9]{1,40}(-[0-9]{1,40})?@g\\.us$' }),
});

const ParticipantsChange = Type.Object(
  {
    actor: Phone,
    action: Type.Union([
      Type.Literal('add'),
      Type.Literal('remove'),
      Type.Literal('promote'),
      Type.Literal('demote'),
      Type.Literal('join'),
      Type.Literal('leave'),
    ]),
    participants: Type.Optional(Type.Array(Phone, { minItems: 1, maxItems: 256 })),
  },
  { additionalProperties: false },
);

const SettingsChange = Type.Object(
  {
    actor: Phone,
    subject: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_SUBJECT })),
    description: Type.Optional(Type.String({ maxLength: MAX_DESCRIPTION })),
    announce: Type.Optional(Type.Boolean()),
    locked: Type.Optional(Type.Boolean()),
    ephemeral: Type.Optional(Type.Union([Type.Literal(0), ...EPHEMERAL_TIMERS.map((s) => Type.Literal(s))])),
  },
  { additionalProperties: false },
);

/** A refusal of the model as the control API's status: 401 → 403 (not an admin), others as they are. */
function asControlError(error: unknown, what: string): unknown {
  if (!(error instanceof GroupRefusal)) return error;
  if (error.code === 401) return new ControlError(403, `actor: must be a group admin to ${what}`);
  if (error.code === 409) return new ControlError(409, `actor: already a member of the group`);
  return new ControlError(error.code, `${what}: ${error.text}`);
}

/** Registers the group administration routes. */
export function registerGroupAdminRoutes(app: FastifyInstance, ctx: SimContext): void {
  app.post<{ Params: Static<typeof GroupParams>; Body: Static<typeof ParticipantsChange> }>(
    '/control/groups/:jid/participants',
    { schema: { params: GroupParams, body: ParticipantsChange } },
    async (request) => {
      const group = groupsOf(ctx.accounts).require(request.params.jid, 'jid');
      const { action, participants } = request.body;
      const actor = ctx.accounts.require(request.body.actor, 'actor');
      if (action !== 'join' && !group.members.has(actor.phone)) {
        throw new ControlError(409, `actor: ${actor.phone} is not a member of ${group.jid}`);
      }
      try {
        if (action === 'join') {
          if (!actor.registered) throw new ControlError(400, `actor: ${actor.phone} is not registered`);
          notifyGroupChange(group, actor, [joinGroup(group, actor)]);
          return { results: [], group: groupView(group) };
        }
        if (action === 'leave') {
          notifyGroupChange(group, actor, [leaveGroup(group, actor)], [actor]);
          return { results: [], group: groupView(group) };
        }
        if (!participants) throw new ControlError(400, `participants: is required with action ${action}`);
        const targets = participants.map((phone) => ({
          jid: phoneJid(phone),
          user: ctx.accounts.get(phone),
        }));
        const outcome = changeParticipants(group, actor, action, targets);
        if (outcome.notification) notifyGroupChange(group, actor, [outcome.notification], outcome.removed);
        const results = outcome.codes.map(({ code }, i) => ({ phone: participants[i], code }));
        return { results, group: groupView(group) };
      } catch (error) {
        throw asControlError(error, `${action} participants`);
      }
    },
  );

  app.post<{ Params: Static<typeof GroupParams>; Body: Static<typeof SettingsChange> }>(
    '/control/groups/:jid',
    { schema: { params: GroupParams, body: SettingsChange } },
    async (request) => {
      const group = groupsOf(ctx.accounts).require(request.params.jid, 'jid');
      const { actor: phone, ...change } = request.body;
      if (Object.keys(change).length === 0) {
        throw new ControlError(400, 'body: give one of subject, description, announce, locked, ephemeral');
      }
      const actor = ctx.accounts.require(phone, 'actor');
      if (!group.members.has(actor.phone)) {
        throw new ControlError(409, `actor: ${actor.phone} is not a member of ${group.jid}`);
      }
      try {
        for (const node of changeSettings(group, actor, change)) notifyGroupChange(group, actor, [node]);
      } catch (error) {
        throw asControlError(error, 'change the group info or settings');
      }
      return groupView(group);
    },
  );
}
