/**
 * Control API, `POST /control/interactive-reply`: a simulated user answers a business's interactive message, as the
 * platform's apps send the answer (Baileys' WAProto/WAProto.proto `Message`), Signal-encrypted to every linked device
 * of the account (messaging/send.ts):
 * - `buttons`: a `buttonsResponseMessage` (`selectedButtonId`, `selectedDisplayText`, type DISPLAY_TEXT);
 * - `list`: a `listResponseMessage` (`title`, listType SINGLE_SELECT, `singleSelectReply.selectedRowId`,
 *   `description`);
 * - `template`: a `templateButtonReplyMessage` (`selectedId`, `selectedDisplayText`, `selectedIndex`);
 * - `flow`: an `interactiveResponseMessage` (`body.text`, `nativeFlowResponseMessage` `name`, `paramsJson`,
 *   `version`).
 * Each quotes the interactive message answered (`contextInfo.stanzaId`) when `quotedId` is given.
 */
import { type Static, Type } from '@sinclair/typebox';
import { proto } from 'baileys';
import type { FastifyInstance } from 'fastify';
import type { SimContext } from '../server/session.ts';
import { quote, sendFromUser } from './content.ts';
import { ControlError } from './errors.ts';
import { Phone } from './schemas.ts';

const ReplyBody = Type.Object(
  {
    from: Phone,
    to: Phone,
    type: Type.Union(
      [Type.Literal('buttons'), Type.Literal('list'), Type.Literal('template'), Type.Literal('flow')],
      {
        description: 'what the user answers: reply buttons, a list, a template button or a flow',
      },
    ),
    text: Type.String({
      maxLength: 4096,
      description: "the title of the button or row picked, a flow's closing text",
    }),
    selectedId: Type.Optional(
      Type.String({ minLength: 1, maxLength: 256, description: 'the button or row id' }),
    ),
    description: Type.Optional(
      Type.String({ minLength: 1, maxLength: 1024, description: 'list: the row description' }),
    ),
    selectedIndex: Type.Optional(
      Type.Integer({ minimum: 0, maximum: 99, description: 'template: the button position' }),
    ),
    flowName: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    paramsJson: Type.Optional(Type.String({ minLength: 1, maxLength: 65536 })),
    flowVersion: Type.Optional(Type.Integer({ minimum: 0, maximum: 2 ** 31 - 1 })),
    quotedId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  },
  { additionalProperties: false },
);

type ReplyRequest = Static<typeof ReplyBody>;

/** The fields each type takes besides `from`, `to`, `type`, `text` and `quotedId`. */
const FIELDS: Record<ReplyRequest['type'], readonly (keyof ReplyRequest)[]> = {
  buttons: ['selectedId'],
  list: ['selectedId', 'description'],
  template: ['selectedId', 'selectedIndex'],
  flow: ['flowName', 'paramsJson', 'flowVersion'],
};

/**
 * The answer `body` describes, as the platform message carrying it.
 * @throws ControlError 400 naming a field its type does not take, or one it needs (`selectedId`; a flow's
 *   `flowName` and `paramsJson`).
 */
function replyMessage(body: ReplyRequest, accountJid: string): proto.IMessage {
  const allowed = FIELDS[body.type];
  for (const field of [
    'selectedId',
    'description',
    'selectedIndex',
    'flowName',
    'paramsJson',
    'flowVersion',
  ] as const) {
    if (body[field] !== undefined && !allowed.includes(field))
      throw new ControlError(400, `${field}: not allowed for type "${body.type}"`);
  }
  const context = quote(body.quotedId, accountJid);
  if (body.type === 'flow') {
    if (body.flowName === undefined) throw new ControlError(400, 'flowName: required for type "flow"');
    if (body.paramsJson === undefined) throw new ControlError(400, 'paramsJson: required for type "flow"');
    return {
      interactiveResponseMessage: {
        body: { text: body.text, format: proto.Message.InteractiveResponseMessage.Body.Format.DEFAULT },
        nativeFlowResponseMessage: {
          name: body.flowName,
          paramsJson: body.paramsJson,
          version: body.flowVersion ?? 1,
        },
        ...context,
      },
    };
  }
  const id = body.selectedId;
  if (id === undefined) throw new ControlError(400, `selectedId: required for type "${body.type}"`);
  switch (body.type) {
    case 'buttons':
      return {
        buttonsResponseMessage: {
          selectedButtonId: id,
          selectedDisplayText: body.text,
          type: proto.Message.ButtonsResponseMessage.Type.DISPLAY_TEXT,
          ...context,
        },
      };
    case 'list':
      return {
        listResponseMessage: {
          title: body.text,
          listType: proto.Message.ListResponseMessage.ListType.SINGLE_SELECT,
          singleSelectReply: { selectedRowId: id },
          ...(body.description === undefined ? {} : { description: body.description }),
          ...context,
        },
      };
    case 'template':
      return {
        templateButtonReplyMessage: {
          selectedId: id,
          selectedDisplayText: body.text,
          ...(body.selectedIndex === undefined ? {} : { selectedIndex: body.selectedIndex }),
          ...context,
        },
      };
  }
}

/** Registers `POST /control/interactive-reply`. */
export function registerInteractiveReplyRoutes(app: FastifyInstance, ctx: SimContext): void {
  app.post<{ Body: ReplyRequest }>(
    '/control/interactive-reply',
    { schema: { body: ReplyBody } },
    async (request, reply) => {
      const body = request.body;
      const result = await sendFromUser(ctx, body.from, body.to, (jid) => replyMessage(body, jid));
      return reply.status(201).send(result);
    },
  );
}
