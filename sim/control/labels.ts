/**
 * Control API: business labels (docs/simulator.md, Business labels; docs/decisions/0045-business-labels.md):
 * - `GET /control/users/{phone}/labels` → `{ labels, chats }`: the account's labels in id order (`{ id, name,
 *   color, predefinedId }`) and, by chat JID, the ids of the labels on each chat, as the account's devices and its
 *   phone set them (model/labels.ts).
 * - `POST /control/users/{phone}/labels` `{ id?, name, color?, deleted? }`: the account's phone creates (no `id`:
 *   the next number after the highest), changes or deletes a label → 200 `{ label, version, devices }`.
 * - `POST /control/users/{phone}/chat-labels` `{ chat, labelId, labeled? }`: the phone puts a label on a chat
 *   (`labeled` true, the default) or takes it off → 200 `{ chat, labels, version, devices }`.
 * Each phone change is a `label_edit` / `label_jid` mutation of the `regular` collection made as Baileys 7 makes it
 * (Utils/chat-utils.js `chatModificationToAppPatch`) and pushed to the linked companions (server/app-state.ts
 * `phoneMutation`): `version` is the collection's new version, `devices` how many companions were notified.
 * 404 for an unknown phone or label; 409 for an account that is not a business account (no `verifiedName`) or whose
 * phone has not shared an app state key yet (no companion ever linked).
 */
import { type Static, Type } from '@sinclair/typebox';
import { chatModificationToAppPatch } from 'baileys';
import type { FastifyInstance } from 'fastify';
import { ModelError, phoneJid, type User } from '../model/accounts.ts';
import { byLabelId, labelsView } from '../model/labels.ts';
import { phoneMutation } from '../server/app-state.ts';
import type { SimContext } from '../server/session.ts';
import { Phone } from './schemas.ts';

const PhoneParams = Type.Object({ phone: Phone });
const LabelId = Type.String({ pattern: '^[0-9]{1,20}$', description: 'a label id (digits)' });

const EditLabel = Type.Object(
  {
    id: Type.Optional(LabelId),
    name: Type.String({ minLength: 1, maxLength: 100 }),
    color: Type.Optional(Type.Integer({ minimum: 0, maximum: 19 })),
    deleted: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

const LabelChat = Type.Object(
  {
    chat: Type.String({
      pattern: '^([1-9][0-9]{6,14}|[0-9]+@s\\.whatsapp\\.net|[0-9]+(-[0-9]+)?@g\\.us|[0-9]+@lid)$',
      description: 'a phone number, or a user, group or LID JID',
    }),
    labelId: LabelId,
    labeled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

/** The user of `phone`, a business account. @throws ModelError 404 unknown phone, 409 not a business account. */
function businessUser(ctx: SimContext, phone: string): User {
  const user = ctx.accounts.require(phone, 'phone');
  if (!user.verifiedName) {
    throw new ModelError(409, `user ${phone} is not a business account (define it with a verifiedName)`);
  }
  return user;
}

/** Registers the label routes on `app`. */
export function registerLabelRoutes(app: FastifyInstance, ctx: SimContext): void {
  app.get<{ Params: Static<typeof PhoneParams> }>(
    '/control/users/:phone/labels',
    { schema: { params: PhoneParams } },
    async (request) => labelsView(ctx.accounts.require(request.params.phone, 'phone')),
  );

  app.post<{ Params: Static<typeof PhoneParams>; Body: Static<typeof EditLabel> }>(
    '/control/users/:phone/labels',
    { schema: { params: PhoneParams, body: EditLabel } },
    async (request) => {
      const user = businessUser(ctx, request.params.phone);
      const { name, color = 0, deleted = false } = request.body;
      const ids = Object.keys(user.labels ?? {}).sort(byLabelId);
      const id = request.body.id ?? String(Number(ids.at(-1) ?? '0') + 1);
      const mod = { addLabel: { id, name, color, deleted } };
      const done = await phoneMutation(user, chatModificationToAppPatch(mod, phoneJid(user.phone)));
      return { label: { id, name, color, predefinedId: null }, ...done };
    },
  );

  app.post<{ Params: Static<typeof PhoneParams>; Body: Static<typeof LabelChat> }>(
    '/control/users/:phone/chat-labels',
    { schema: { params: PhoneParams, body: LabelChat } },
    async (request) => {
      const user = businessUser(ctx, request.params.phone);
      const { labelId, labeled = true } = request.body;
      const chat = request.body.chat.includes('@') ? request.body.chat : phoneJid(request.body.chat);
      if (!user.labels?.[labelId])
        throw new ModelError(404, `labelId: user ${user.phone} has no label ${labelId}`);
      const mod = labeled ? { addChatLabel: { labelId } } : { removeChatLabel: { labelId } };
      const done = await phoneMutation(user, chatModificationToAppPatch(mod, chat));
      return { chat, labels: user.chatLabels?.[chat] ?? [], ...done };
    },
  );
}
