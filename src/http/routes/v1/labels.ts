import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { LABEL_COLORS, LABEL_NAME_MAX } from '../../../domain/labels.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { created, createdResponses, InstanceQuery, ok, responses } from '../../schemas.ts';
import { ChatParams } from './chats-schemas.ts';

const LabelIdString = (description: string) =>
  Type.String({ minLength: 1, maxLength: 20, description, examples: ['1'] });

/** One label of the account (docs/api.md#labels). */
export const LabelSchema = Type.Object(
  {
    id: LabelIdString("the platform's label id (digits)"),
    name: Type.String({ description: "the label's name", examples: ['New customer'] }),
    color: Type.Integer({
      minimum: 0,
      maximum: LABEL_COLORS - 1,
      description: 'colour id, 0 to 19 (the platform shows each as one of its 20 label colours)',
      examples: [0],
    }),
    predefinedId: Type.Union([Type.String(), Type.Null()], {
      description: "number of one of the platform's predefined labels; null for a label the account made",
      examples: [null],
    }),
  },
  { title: 'Label' },
);

/** Answer of `GET /v1/labels`. */
export const LabelList = Type.Object(
  { labels: Type.Array(LabelSchema, { description: 'the labels parley has seen, in id order' }) },
  { title: 'LabelList' },
);

/** Answer of the chat label routes: the chat and its labels afterwards. */
export const ChatLabelList = Type.Object(
  {
    chat: Type.String({ description: 'the chat JID', examples: ['5511988887777@s.whatsapp.net'] }),
    labels: Type.Array(LabelSchema, { description: "the chat's labels, in id order" }),
  },
  { title: 'ChatLabelList' },
);

const Name = Type.String({
  minLength: 1,
  maxLength: LABEL_NAME_MAX,
  description: "the label's name (trimmed; unique in the account, ignoring case)",
  examples: ['Awaiting payment'],
});
const Color = Type.Integer({
  minimum: 0,
  maximum: LABEL_COLORS - 1,
  description: 'colour id, 0 to 19',
  examples: [3],
});

/** Body of `POST /v1/labels`. */
export const CreateLabelBody = Type.Object(
  { name: Name, color: Type.Optional({ ...Color, description: 'colour id, 0 to 19; default 0' }) },
  { title: 'CreateLabelBody', additionalProperties: false },
);

/** Body of `PATCH /v1/labels/{id}`: at least one field. */
export const UpdateLabelBody = Type.Object(
  { name: Type.Optional(Name), color: Type.Optional(Color) },
  { title: 'UpdateLabelBody', additionalProperties: false },
);

/** Body of `POST` and `PUT /v1/chats/{jid}/labels`. */
export const ChatLabelsBody = Type.Object(
  {
    labelIds: Type.Array(LabelIdString('a label id'), {
      maxItems: 100,
      description: 'label ids (from GET /v1/labels)',
      examples: [['1', '3']],
    }),
  },
  { title: 'ChatLabelsBody', additionalProperties: false },
);
export type ChatLabelsBody = Static<typeof ChatLabelsBody>;

const LabelParams = Type.Object({ id: LabelIdString('the label id') });
const ChatLabelParams = Type.Object({
  ...ChatParams.properties,
  labelId: LabelIdString('the label id'),
});

/**
 * `GET` and `POST /v1/labels`, `PATCH` and `DELETE /v1/labels/{id}` (docs/api.md#labels,
 * docs/decisions/0045-business-labels.md): the account's business labels. Scope `chat:messages`
 * (docs/decisions/0003-scopes-and-keys.md), instance from query `from` (docs/decisions/0002-instance-resolution.md).
 * Registered under the `/v1/labels` prefix.
 */
export async function labelRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { labels } = app.services.app;
  const config = { scope: 'chat:messages', instance: 'query' } as const;
  const tags = ['labels'];

  app.get(
    '',
    {
      config,
      schema: {
        tags,
        operationId: 'listLabels',
        summary: "The account's business labels, as parley last saw them",
        querystring: InstanceQuery,
        response: responses('The labels', LabelList),
      },
    },
    async (request) => ok({ labels: await labels.list(instanceOf(request)) }),
  );

  app.post(
    '',
    {
      config,
      schema: {
        tags,
        operationId: 'createLabel',
        summary: 'Create a business label',
        querystring: InstanceQuery,
        body: CreateLabelBody,
        response: createdResponses('The new label', LabelSchema, 409, 502),
      },
    },
    async (request, reply) => {
      const label = await labels.create(instanceOf(request), request.body);
      reply.code(201);
      return created(label);
    },
  );

  app.patch(
    '/:id',
    {
      config,
      schema: {
        tags,
        operationId: 'updateLabel',
        summary: 'Rename or recolour a business label',
        querystring: InstanceQuery,
        params: LabelParams,
        body: UpdateLabelBody,
        response: responses('The label', LabelSchema, 409, 502),
      },
    },
    async (request) => ok(await labels.update(instanceOf(request), request.params.id, request.body)),
  );

  app.delete(
    '/:id',
    {
      config,
      schema: {
        tags,
        operationId: 'deleteLabel',
        summary: 'Delete a business label (it comes off every chat)',
        querystring: InstanceQuery,
        params: LabelParams,
        response: responses('The label was deleted', LabelSchema, 409, 502),
      },
    },
    async (request) => ok(await labels.remove(instanceOf(request), request.params.id)),
  );
}

/**
 * `GET`, `POST` and `PUT /v1/chats/{jid}/labels`, `DELETE /v1/chats/{jid}/labels/{labelId}` (docs/api.md#labels,
 * docs/decisions/0045-business-labels.md): the labels of one chat. `POST` adds labels, `PUT` makes them the chat's
 * only ones, `DELETE` takes one off; each answers the chat's labels afterwards. Scope `chat:messages`, instance from
 * query `from`. Registered under the `/v1/chats` prefix.
 */
export async function chatLabelRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { labels } = app.services.app;
  const config = { scope: 'chat:messages', instance: 'query' } as const;
  const tags = ['labels'];

  app.get(
    '/:jid/labels',
    {
      config,
      schema: {
        tags,
        operationId: 'listChatLabels',
        summary: "A chat's business labels, as parley last saw them",
        params: ChatParams,
        querystring: InstanceQuery,
        response: responses("The chat's labels", ChatLabelList),
      },
    },
    async (request) => ok(await labels.chatLabels(instanceOf(request), request.params.jid)),
  );

  const change = (mode: 'add' | 'set') => ({
    config,
    schema: {
      tags,
      operationId: mode === 'add' ? 'addChatLabels' : 'setChatLabels',
      summary:
        mode === 'add'
          ? 'Put business labels on a chat (its other labels stay)'
          : "Make these business labels the chat's only ones",
      params: ChatParams,
      querystring: InstanceQuery,
      body: ChatLabelsBody,
      response: responses("The chat's labels afterwards", ChatLabelList, 409, 502),
    },
  });
  app.post('/:jid/labels', change('add'), async (request) =>
    ok(await labels.labelChat(instanceOf(request), request.params.jid, request.body.labelIds, 'add')),
  );
  app.put('/:jid/labels', change('set'), async (request) =>
    ok(await labels.labelChat(instanceOf(request), request.params.jid, request.body.labelIds, 'set')),
  );

  app.delete(
    '/:jid/labels/:labelId',
    {
      config,
      schema: {
        tags,
        operationId: 'removeChatLabel',
        summary: 'Take a business label off a chat',
        params: ChatLabelParams,
        querystring: InstanceQuery,
        response: responses("The chat's labels afterwards", ChatLabelList, 409, 502),
      },
    },
    async (request) =>
      ok(await labels.unlabelChat(instanceOf(request), request.params.jid, request.params.labelId)),
  );
}
