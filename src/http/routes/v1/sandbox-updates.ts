import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { instanceOf } from '../../plugins/instance.ts';
import { Details, InstanceQuery, ok, Phone, responses } from '../../schemas.ts';

const MessageId = (description: string) =>
  Type.String({ minLength: 1, maxLength: 128, description, examples: ['3A6D5E0F9C1B2A3D4E5F60718293A4B5'] });

/** Body of `POST /v1/sandbox/edit`: the simulated user edits a text message they sent. */
export const SandboxEditBody = Type.Object(
  {
    phone: Phone('the simulated user who sent the message'),
    id: MessageId('id of a text message the user sent to this instance'),
    body: Type.String({ minLength: 1, maxLength: 65_536, examples: ['Is the shop open tomorrow?'] }),
  },
  { title: 'SandboxEditBody' },
);
export type SandboxEditBody = Static<typeof SandboxEditBody>;

/** Body of `POST /v1/sandbox/delete`: the simulated user deletes a message they sent, for everyone. */
export const SandboxDeleteBody = Type.Object(
  {
    phone: Phone('the simulated user who sent the message'),
    id: MessageId('id of a message the user sent to this instance'),
  },
  { title: 'SandboxDeleteBody' },
);
export type SandboxDeleteBody = Static<typeof SandboxDeleteBody>;

/** Body of `POST /v1/sandbox/vote`: the simulated user votes on a poll this instance sent. */
export const SandboxVoteBody = Type.Object(
  {
    phone: Phone('the voter'),
    id: MessageId('id of a poll this instance sent'),
    options: Type.Array(Type.String({ minLength: 1, maxLength: 100 }), {
      maxItems: 12,
      description: 'the option names chosen; [] withdraws the vote',
      examples: [['Monday']],
    }),
  },
  { title: 'SandboxVoteBody' },
);
export type SandboxVoteBody = Static<typeof SandboxVoteBody>;

/**
 * Sandbox helpers for edits, deletions and polls under `/v1/sandbox`: a simulated user edits or deletes their message
 * (`MessageUpdate` event) or votes on a poll (`PollVote` event). Same scope as the other helpers
 * (docs/decisions/0003-scopes-and-keys.md).
 */
export async function sandboxUpdateRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { sandbox } = app.services.app;
  const config = { scope: 'chat:session', testOnly: true, instance: 'query' } as const;
  const tags = ['sandbox'];

  app.post(
    '/edit',
    {
      config,
      schema: {
        tags,
        operationId: 'sandboxEdit',
        summary: 'A simulated user edits a text message they sent: MessageUpdate event (kind edit)',
        querystring: InstanceQuery,
        body: SandboxEditBody,
        response: responses('Edit delivered to the instance', Details, 409),
      },
    },
    async (request) => {
      const { phone, id, body } = request.body;
      await sandbox.updateMessage(instanceOf(request), { phone, id, body });
      return ok({ details: `Message ${id} edited` });
    },
  );

  app.post(
    '/delete',
    {
      config,
      schema: {
        tags,
        operationId: 'sandboxDelete',
        summary:
          'A simulated user deletes a message they sent, for everyone: MessageUpdate event (kind delete)',
        querystring: InstanceQuery,
        body: SandboxDeleteBody,
        response: responses('Deletion delivered to the instance', Details, 409),
      },
    },
    async (request) => {
      const { phone, id } = request.body;
      await sandbox.updateMessage(instanceOf(request), { phone, id });
      return ok({ details: `Message ${id} deleted` });
    },
  );

  app.post(
    '/vote',
    {
      config,
      schema: {
        tags,
        operationId: 'sandboxVote',
        summary: 'A simulated user votes on a poll this instance sent: PollVote event',
        querystring: InstanceQuery,
        body: SandboxVoteBody,
        response: responses('Vote delivered to the instance', Details, 409, 422),
      },
    },
    async (request) => {
      const { phone, id, options } = request.body;
      await sandbox.vote(instanceOf(request), { phone, id, options });
      return ok({ details: `Vote on ${id} delivered` });
    },
  );
}
