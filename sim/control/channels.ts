/**
 * Control API, channels (newsletters; model/newsletters.ts): `POST /control/channels` makes a channel (`name`,
 * optional `description`) and answers its JID and invite code; `GET /control/channels/:jid` shows it with its
 * followers; `GET /control/users/:phone/channels` lists the channels an account follows.
 */
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { newslettersOf, type SimChannel } from '../model/newsletters.ts';
import type { SimContext } from '../server/session.ts';
import { ControlError } from './errors.ts';
import { Phone } from './schemas.ts';

const CreateChannel = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100 }),
    description: Type.Optional(Type.String({ maxLength: 2048 })),
  },
  { additionalProperties: false },
);
const ChannelParams = Type.Object({ jid: Type.String({ pattern: '^[0-9]+@newsletter$' }) });
const PhoneParams = Type.Object({ phone: Phone });

/** A channel as the control API shows it: followers as a sorted array of phones. */
function view(channel: SimChannel) {
  return {
    jid: channel.jid,
    name: channel.name,
    ...(channel.description === undefined ? {} : { description: channel.description }),
    invite: channel.invite,
    link: `https://whatsapp.com/channel/${channel.invite}`,
    followers: [...channel.followers].sort(),
  };
}

/** Registers the channel routes. */
export function registerChannelRoutes(app: FastifyInstance, ctx: SimContext): void {
  const channels = () => newslettersOf(ctx.accounts);

  app.post<{ Body: Static<typeof CreateChannel> }>(
    '/control/channels',
    { schema: { body: CreateChannel } },
    async (request, reply) => {
      const { name, description } = request.body;
      const channel = channels().create({ name, ...(description === undefined ? {} : { description }) });
      return reply.status(201).send(view(channel));
    },
  );

  app.get<{ Params: Static<typeof ChannelParams> }>(
    '/control/channels/:jid',
    { schema: { params: ChannelParams } },
    async (request) => {
      const channel = channels().byJid(request.params.jid);
      if (!channel) throw new ControlError(404, 'jid: no such channel');
      return view(channel);
    },
  );

  app.get<{ Params: Static<typeof PhoneParams> }>(
    '/control/users/:phone/channels',
    { schema: { params: PhoneParams } },
    async (request) => {
      const user = ctx.accounts.require(request.params.phone, 'phone');
      return channels().followedBy(user.phone).map(view);
    },
  );
}
