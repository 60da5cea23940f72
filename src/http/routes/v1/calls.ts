import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { type EngineCall, MAX_CALL_MESSAGE } from '../../../domain/calls.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { InstanceQuery, ok, responses } from '../../schemas.ts';

/** Body of `POST /v1/calls/settings`. */
export const CallSettingsBody = Type.Object(
  {
    autoReject: Type.Boolean({
      description: 'true: every incoming voice or video call is rejected as it rings',
      examples: [true],
    }),
    message: Type.Optional(
      Type.String({
        maxLength: MAX_CALL_MESSAGE,
        description:
          'text sent to the caller after an automatic reject; omitted or empty: none. Only with autoReject: true',
        examples: ["Sorry, we can't take calls. Please send a message."],
      }),
    ),
  },
  { title: 'CallSettingsBody' },
);
export type CallSettingsBody = Static<typeof CallSettingsBody>;

/** `data` of both call settings operations. */
export const CallSettingsView = Type.Object(
  {
    autoReject: Type.Boolean({ examples: [true] }),
    message: Type.Union([Type.String(), Type.Null()], {
      description: 'text sent after an automatic reject; null for none',
      examples: ["Sorry, we can't take calls. Please send a message."],
    }),
  },
  { title: 'CallSettings' },
);

/** Path parameters of `POST /v1/calls/{id}/reject`. */
export const CallParams = Type.Object({
  id: Type.String({
    minLength: 1,
    maxLength: 128,
    description: 'the call id (callId of the Call events)',
    examples: ['6D3F0A9C2B41E8F07A1C5D92B3E4F60A'],
  }),
});
export type CallParams = Static<typeof CallParams>;

/** `data` of `POST /v1/calls/{id}/reject`: the call as its `rejected` Call event reports it. */
export const RejectedCallView = Type.Object(
  {
    callId: Type.String({ examples: ['6D3F0A9C2B41E8F07A1C5D92B3E4F60A'] }),
    from: Type.String({ description: "the caller's phone JID", examples: ['5511988887777@s.whatsapp.net'] }),
    status: Type.Literal('rejected'),
    isVideo: Type.Boolean({ examples: [false] }),
    isGroup: Type.Boolean({ examples: [false] }),
    autoRejected: Type.Literal(false, { description: 'false: this reject was asked for, not automatic' }),
    timestamp: Type.String({ format: 'date-time', description: 'when the call was rejected (RFC 3339 UTC)' }),
  },
  { title: 'RejectedCall' },
);

const rejectedView = (call: EngineCall) => ({
  callId: call.id,
  from: call.from,
  status: 'rejected' as const,
  isVideo: call.isVideo,
  isGroup: call.isGroup,
  autoRejected: false as const,
  timestamp: new Date(call.timestamp).toISOString(),
});

const view = (settings: { reject: boolean; message: string | null }) => ({
  autoReject: settings.reject,
  message: settings.message,
});

/**
 * `/v1/calls/settings` (docs/decisions/0026-chats-edits-polls-and-calls.md): the instance's call handling, stored per
 * instance. Scope `chat:session` (docs/decisions/0003-scopes-and-keys.md: per-instance configuration, like the HMAC
 * key), instance from query `from` (docs/decisions/0002-instance-resolution.md). `POST /v1/calls/{id}/reject`
 * declines one ringing call (docs/decisions/0041-forward-calls-channels.md), same scope: it is call handling.
 */
export async function callsRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { calls } = app.services.app;
  const config = { scope: 'chat:session', instance: 'query' } as const;
  const tags = ['calls'];

  app.get(
    '/settings',
    {
      config,
      schema: {
        tags,
        operationId: 'getCallSettings',
        summary: 'Whether incoming calls are rejected automatically, and the message then sent',
        querystring: InstanceQuery,
        response: responses('The call settings', CallSettingsView),
      },
    },
    async (request) => ok(view(await calls.settings(instanceOf(request)))),
  );

  app.post(
    '/settings',
    {
      config,
      schema: {
        tags,
        operationId: 'setCallSettings',
        summary: 'Reject incoming calls automatically (or stop), with an optional message to the caller',
        querystring: InstanceQuery,
        body: CallSettingsBody,
        response: responses('The call settings now in force', CallSettingsView),
      },
    },
    async (request) => {
      const { autoReject, message } = request.body;
      const saved = await calls.update(instanceOf(request), {
        reject: autoReject,
        message: message ?? null,
      });
      return ok(view(saved));
    },
  );

  app.post(
    '/:id/reject',
    {
      config,
      schema: {
        tags,
        operationId: 'rejectCall',
        summary: 'Decline a ringing call: the caller sees it rejected; a Call event rejected is recorded',
        querystring: InstanceQuery,
        params: CallParams,
        response: responses('The rejected call', RejectedCallView, 409, 502),
      },
    },
    async (request) => ok(rejectedView(await calls.reject(instanceOf(request), request.params.id))),
  );
}
