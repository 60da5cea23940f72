import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Channel } from '../../../domain/channels.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { InstanceQuery, InstanceSelector, ok, responses } from '../../schemas.ts';

/** One channel in an answer. */
export const ChannelView = Type.Object(
  {
    jid: Type.String({ description: "the channel's JID", examples: ['120363000000000001@newsletter'] }),
    name: Type.String({ examples: ['Parley News'] }),
    description: Type.Optional(Type.String({ examples: ['Releases and tips'] })),
    subscribers: Type.Optional(
      Type.Integer({ minimum: 0, description: 'followers, when the platform tells', examples: [1251] }),
    ),
    invite: Type.Optional(
      Type.String({
        description: 'invite code: the channel link is https://whatsapp.com/channel/<invite>',
        examples: ['0029VaParleyNews0000000001'],
      }),
    ),
  },
  { title: 'Channel' },
);

/** `data` of `GET /v1/channels`. */
export const ChannelList = Type.Object(
  { channels: Type.Array(ChannelView, { description: 'the channels the account follows' }) },
  { title: 'ChannelList' },
);

/** `data` of follow and unfollow: the channel and whether the account now follows it. */
export const FollowResult = Type.Object(
  {
    channel: ChannelView,
    following: Type.Boolean({
      description: 'true after a follow, false after an unfollow',
      examples: [true],
    }),
  },
  { title: 'ChannelFollowResult' },
);

/** Body of `POST /v1/channels/follow` and `/unfollow`: `jid` or `invite`, exactly one. */
export const ChannelBody = Type.Object(
  {
    jid: Type.Optional(
      Type.String({
        pattern: '^[0-9]{1,40}@newsletter$',
        'x-message': '{field} must be a channel JID, <digits>@newsletter',
        description: "the channel's JID; or give invite",
        examples: ['120363000000000001@newsletter'],
      }),
    ),
    invite: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: 'an invite code or link (https://whatsapp.com/channel/<code>); or give jid',
        examples: ['https://whatsapp.com/channel/0029VaParleyNews0000000001'],
      }),
    ),
    from: Type.Optional({
      ...InstanceSelector,
      description: 'the instance: its UUID or linked phone number; omitted: the most recently connected',
      examples: ['5511999990001'],
    }),
  },
  { title: 'ChannelBody' },
);
export type ChannelBody = Static<typeof ChannelBody>;

const view = (channel: Channel) => ({
  jid: channel.jid,
  name: channel.name,
  ...(channel.description === undefined ? {} : { description: channel.description }),
  ...(channel.subscribers === undefined ? {} : { subscribers: channel.subscribers }),
  ...(channel.invite === undefined ? {} : { invite: channel.invite }),
});

/**
 * `/v1/channels` (docs/decisions/0041-forward-calls-channels.md): the WhatsApp channels (newsletters) the account
 * follows; follow and unfollow by JID or invite. Scope `chat:messages` (docs/decisions/0003-scopes-and-keys.md: what
 * the account reads and subscribes to sits with messages); instance from query `from` for the list, body `from` for
 * the changes (docs/decisions/0002-instance-resolution.md).
 */
export async function channelRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { channels } = app.services.app;
  const tags = ['channels'];
  const errorsOfChange = [409, 502, 503];

  app.get(
    '',
    {
      config: { scope: 'chat:messages', instance: 'query' },
      schema: {
        tags,
        operationId: 'listChannels',
        summary: 'The channels (newsletters) the account follows',
        querystring: InstanceQuery,
        response: responses('The followed channels', ChannelList, 409, 502, 503),
      },
    },
    async (request) => ok({ channels: (await channels.list(instanceOf(request))).map(view) }),
  );

  for (const [path, following] of [
    ['/follow', true],
    ['/unfollow', false],
  ] as const) {
    app.post(
      path,
      {
        config: { scope: 'chat:messages', instance: 'body' },
        schema: {
          tags,
          operationId: following ? 'followChannel' : 'unfollowChannel',
          summary: following
            ? 'Follow a channel by JID or invite (code or link); idempotent'
            : 'Stop following a channel by JID or invite (code or link); idempotent',
          body: ChannelBody,
          response: responses(
            following ? 'The channel, now followed' : 'The channel, no longer followed',
            FollowResult,
            ...errorsOfChange,
          ),
        },
      },
      async (request) => {
        const input = { jid: request.body.jid, invite: request.body.invite };
        const channel = following
          ? await channels.follow(instanceOf(request), input)
          : await channels.unfollow(instanceOf(request), input);
        return ok({ channel: view(channel), following });
      },
    );
  }
}
