import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { instanceOf } from '../../plugins/instance.ts';
import { InstanceQuery, ok, Phone, responses } from '../../schemas.ts';

/** Body of `POST /v1/sandbox/call`. */
export const SandboxCallBody = Type.Object(
  {
    phone: Phone('the simulated user who calls'),
    video: Type.Optional(Type.Boolean({ description: 'a video call; default voice', examples: [false] })),
    ring: Type.Optional(
      Type.Boolean({
        description:
          'true: the call keeps ringing (status ringing, no missed event) until POST /v1/calls/{id}/reject ' +
          'declines it; ignored while the instance rejects calls automatically. Default false',
        examples: [true],
      }),
    ),
  },
  { title: 'SandboxCallBody' },
);
export type SandboxCallBody = Static<typeof SandboxCallBody>;

/** `data` of `POST /v1/sandbox/call`. */
export const SandboxCallResult = Type.Object(
  {
    id: Type.String({ description: 'the call id (callId of the Call events)', examples: ['6D3F0A9C2B…'] }),
    status: Type.Union([Type.Literal('missed'), Type.Literal('rejected'), Type.Literal('ringing')], {
      description:
        'rejected when the instance rejects calls automatically, else ringing when asked with ring: true, else missed',
    }),
  },
  { title: 'SandboxCallResult' },
);

/**
 * `POST /v1/sandbox/call` (docs/decisions/0026-chats-edits-polls-and-calls.md): a simulated user calls the account.
 * Test keys only, scope `chat:session` like every sandbox helper (docs/decisions/0003-scopes-and-keys.md,
 * docs/decisions/0004-sandbox.md).
 */
export async function sandboxCallRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { sandbox } = app.services.app;
  app.post(
    '/call',
    {
      config: { scope: 'chat:session', testOnly: true, instance: 'query' },
      schema: {
        tags: ['sandbox'],
        operationId: 'sandboxCall',
        summary:
          'A simulated user calls: Call event offer, then rejected (automatic reject on, message sent), missed, or it rings',
        querystring: InstanceQuery,
        body: SandboxCallBody,
        response: responses('The call id and how the call ended', SandboxCallResult, 409, 422),
      },
    },
    async (request) => {
      const { phone, video, ring } = request.body;
      return ok(
        await sandbox.call(instanceOf(request), {
          phone,
          ...(video === undefined ? {} : { video }),
          ...(ring === undefined ? {} : { ring }),
        }),
      );
    },
  );
}
