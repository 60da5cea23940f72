import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { errors } from '../../../domain/errors.ts';
import { lidJid, parseLid } from '../../../domain/lids.ts';
import type { Contact } from '../../../domain/messages.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { InstanceQuery, ok, Phone, responses } from '../../schemas.ts';

/** Most numbers one `POST /v1/contacts/check` may carry (docs/decisions/0020-security-promises.md). */
export const MAX_CHECK_PHONES = 500;
/** Most numbers one `GET /v1/contacts/info` may carry (comma-separated `phone`). */
export const MAX_INFO_PHONES = 100;

/**
 * Body of `POST /v1/contacts/check` (docs/api.md#contacts; docs/decisions/0020-security-promises.md: at most 500
 * numbers).
 */
export const CheckBody = Type.Object(
  {
    phones: Type.Array(Phone('a number to check'), {
      minItems: 1,
      maxItems: MAX_CHECK_PHONES,
      description: `numbers to check, 1 to ${MAX_CHECK_PHONES}; one result per number, in order`,
      examples: [['5511988887777', '5511977770000']],
    }),
  },
  { title: 'CheckBody' },
);
export type CheckBody = Static<typeof CheckBody>;

/** One entry of a registration check (docs/api.md#contacts). */
export const CheckEntry = Type.Object(
  {
    query: Type.String({ description: 'the number that was checked', examples: ['5511999990000'] }),
    isInPlatform: Type.Boolean({ description: 'whether the number is registered on the platform' }),
    jid: Type.Union([Type.String(), Type.Null()], {
      description: 'user JID; null when not registered',
      examples: ['5511999990000@s.whatsapp.net'],
    }),
    verifiedName: Type.String({ description: 'verified business name; empty when none', examples: [''] }),
  },
  { title: 'CheckEntry' },
);
export type CheckEntry = Static<typeof CheckEntry>;

/** `data` of `POST /v1/contacts/check`. */
export const CheckResult = Type.Object({ users: Type.Array(CheckEntry) }, { title: 'CheckResult' });
export type CheckResult = Static<typeof CheckResult>;

/** One value of the contact list (docs/api.md#contacts); strings are empty when unknown. */
export const ContactEntry = Type.Object(
  {
    businessName: Type.String({ examples: [''] }),
    firstName: Type.String({ examples: ['Ana'] }),
    fullName: Type.String({ examples: ['Ana Souza'] }),
    pushName: Type.String({ examples: ['Ana'] }),
    found: Type.Boolean({
      description:
        "true when the platform's contact list holds the user; false when known only from messages",
    }),
  },
  { title: 'ContactEntry' },
);
export type ContactEntry = Static<typeof ContactEntry>;

/** `data` of `GET /v1/contacts/list`: an object keyed by user JID (docs/api.md#contacts). */
export const ContactList = Type.Record(Type.String(), ContactEntry, {
  title: 'ContactList',
  description: 'keys are user JIDs',
  examples: [
    {
      '5511999990000@s.whatsapp.net': {
        businessName: '',
        firstName: 'Ana',
        fullName: 'Ana Souza',
        pushName: 'Ana',
        found: true,
      },
    },
  ],
});
export type ContactList = Static<typeof ContactList>;

/** Query of `GET /v1/contacts/info` (docs/api.md#contacts): one number or several separated by commas. */
export const InfoQuery = Type.Object({
  phone: Type.String({
    minLength: 1,
    maxLength: MAX_INFO_PHONES * 16,
    description: `one number, or up to ${MAX_INFO_PHONES} separated by commas`,
    examples: ['5511988887777,5511977776666'],
  }),
  from: InstanceQuery.properties.from,
});
export type InfoQuery = Static<typeof InfoQuery>;

/** One entry of `GET /v1/contacts/info` (docs/api.md#contacts). */
export const InfoEntry = Type.Object(
  {
    query: Type.String({ examples: ['5511999990000'] }),
    jid: Type.Union([Type.String(), Type.Null()], {
      description: 'user JID; null when not registered',
      examples: ['5511999990000@s.whatsapp.net'],
    }),
    status: Type.String({ description: "the user's about text; empty when none", examples: ['Available'] }),
    pictureId: Type.String({
      description: 'id of the profile picture; empty when none',
      examples: ['1690000000'],
    }),
    verifiedName: Type.String({ description: 'verified business name; empty when none', examples: [''] }),
  },
  { title: 'InfoEntry' },
);
export type InfoEntry = Static<typeof InfoEntry>;

/** `data` of `GET /v1/contacts/info`. */
export const InfoResult = Type.Object({ users: Type.Array(InfoEntry) }, { title: 'InfoResult' });
export type InfoResult = Static<typeof InfoResult>;

/** Query of `GET /v1/contacts/avatar` (docs/api.md#contacts). */
export const AvatarQuery = Type.Object({
  phone: Phone('the user whose profile picture to fetch', '5511977776666'),
  from: InstanceQuery.properties.from,
});
export type AvatarQuery = Static<typeof AvatarQuery>;

/** `data` of `GET /v1/contacts/avatar` (docs/api.md#contacts). */
export const AvatarResult = Type.Object(
  {
    url: Type.String({ description: 'URL of the picture', examples: ['https://pps.whatsapp.net/v/t61/…'] }),
    id: Type.String({ description: 'id of the picture', examples: ['1690000000'] }),
  },
  { title: 'AvatarResult' },
);
export type AvatarResult = Static<typeof AvatarResult>;

/**
 * Splits a comma-separated list of phone numbers (`GET /v1/contacts/info?phone=`), trimming blanks.
 * @throws DomainError invalid naming the field (`phone`, or `phone[2]` in a list) and the rule
 *   (docs/decisions/0001-envelope-and-error-codes.md), or the limit when more than `max` numbers are given.
 */
export function parsePhoneList(raw: string, field: string, max: number): string[] {
  const phones = raw.split(',').map((p) => p.trim());
  if (phones.length > max) throw errors.badRequest(`${field} must list at most ${max} numbers`);
  phones.forEach((phone, i) => {
    if (!/^[0-9]{8,15}$/.test(phone)) {
      const name = phones.length === 1 ? field : `${field}[${i}]`;
      throw errors.badRequest(`${name} must be digits only, international format, no leading +`);
    }
  });
  return phones;
}

/**
 * The contact list object of docs/api.md#contacts, keyed by user JID: the platform's contacts merged with
 * the users the instance exchanged messages with (docs/decisions/0004-sandbox.md). A JID listed twice keeps the first
 * non-empty value of each name. `found` is true for every listed user (the platform knows them: a contact, or a user
 * whose messages carried a push name), as on the reference API.
 */
export function contactList(contacts: readonly Contact[]): ContactList {
  const out: ContactList = {};
  for (const c of contacts) {
    const known = out[c.jid];
    out[c.jid] = {
      businessName: known?.businessName || c.businessName,
      firstName: known?.firstName || c.firstName,
      fullName: known?.fullName || c.fullName,
      pushName: known?.pushName || c.pushName,
      found: true,
    };
  }
  return out;
}

const tags = ['contacts'];

/**
 * `/v1/contacts/*` (docs/api.md#contacts); scope `chat:contacts` (docs/decisions/0003-scopes-and-keys.md), instance
 * per docs/decisions/0002-instance-resolution.md.
 */
export async function contactsRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { contacts } = app.services.app;
  const config = { scope: 'chat:contacts', instance: 'query' } as const;

  app.post(
    '/check',
    {
      config,
      schema: {
        tags,
        operationId: 'checkContacts',
        summary: 'Check which numbers are registered on the platform (one entry per number, in order)',
        querystring: InstanceQuery,
        body: CheckBody,
        response: responses('One entry per number, in the order given', CheckResult, 409, 502, 503),
      },
    },
    async (request) => {
      const checked = await contacts.check(instanceOf(request), request.body.phones);
      const users = checked.map(
        (entry): CheckEntry => ({
          query: entry.query,
          isInPlatform: entry.isInPlatform,
          jid: entry.isInPlatform ? entry.jid : null,
          verifiedName: entry.verifiedName,
        }),
      );
      return ok({ users });
    },
  );

  app.get(
    '/list',
    {
      config,
      schema: {
        tags,
        operationId: 'listContacts',
        summary: 'Contacts of the account, keyed by user JID',
        querystring: InstanceQuery,
        response: responses('The contacts, keyed by user JID', ContactList, 409, 502, 503),
      },
    },
    async (request) => {
      return ok(contactList(await contacts.list(instanceOf(request))));
    },
  );

  app.get(
    '/info',
    {
      config,
      schema: {
        tags,
        operationId: 'getContactInfo',
        summary: 'Profile details (about text, picture id, verified name) of one or more users',
        querystring: InfoQuery,
        response: responses('Profile details, keyed by user JID', InfoResult, 409, 502, 503),
      },
    },
    async (request) => {
      const phones = parsePhoneList(request.query.phone, 'phone', MAX_INFO_PHONES);
      const infos = await contacts.info(instanceOf(request), [...new Set(phones)]);
      const byPhone = new Map(infos.map((entry) => [entry.query, entry]));
      const users = phones.map(
        (phone): InfoEntry => ({
          query: phone,
          jid: byPhone.get(phone)?.jid ?? null,
          status: byPhone.get(phone)?.status ?? '',
          pictureId: byPhone.get(phone)?.pictureId ?? '',
          verifiedName: byPhone.get(phone)?.verifiedName ?? '',
        }),
      );
      return ok({ users });
    },
  );

  app.get(
    '/avatar',
    {
      config,
      schema: {
        tags,
        operationId: 'getContactAvatar',
        summary: "A user's profile picture (404 when the user has none)",
        querystring: AvatarQuery,
        response: responses("The URL and id of the user's profile picture", AvatarResult, 409, 502, 503),
      },
    },
    async (request) => {
      const phone = request.query.phone;
      const avatar = await contacts.avatar(instanceOf(request), phone);
      if (!avatar) throw errors.notFound(`user ${phone} has no profile picture`);
      return ok({ url: avatar.url, id: avatar.id });
    },
  );

  await contactsLidRoute(fastify);
}

/**
 * Query of `GET /v1/contacts/lid` (docs/api.md#contacts, docs/decisions/0038-lid-mappings.md): exactly one of `lid`
 * (digits, or `<digits>@lid`) and `phone`; the handler checks that one is given.
 */
export const LidQuery = Type.Object({
  lid: Type.Optional(
    Type.String({
      pattern: '^[0-9]{1,20}(@lid)?$',
      'x-message': '{field} must be a LID: 1 to 20 digits, optionally followed by @lid',
      description: 'the LID to look up: digits, or `<digits>@lid`; give this or `phone`',
      examples: ['137777888891155@lid'],
    }),
  ),
  phone: Type.Optional(Phone('the phone number to look up; give this or `lid`', '5511977776666')),
  from: InstanceQuery.properties.from,
});
export type LidQuery = Static<typeof LidQuery>;

/** `data` of `GET /v1/contacts/lid`: one phone↔LID pair (docs/decisions/0038-lid-mappings.md). */
export const LidResult = Type.Object(
  {
    phone: Type.String({ description: 'phone number, digits only', examples: ['5511977776666'] }),
    lid: Type.String({ description: 'the LID, `<digits>@lid`', examples: ['136666777791155@lid'] }),
  },
  { title: 'LidResult' },
);
export type LidResult = Static<typeof LidResult>;

/**
 * The lookup `GET /v1/contacts/lid` asks for: `{ lid }` (digits) or `{ phone }`.
 * @throws DomainError invalid `lid or phone is required` when neither is given, `give either lid or phone, not both`
 *   when both are (docs/decisions/0001-envelope-and-error-codes.md).
 */
export function lidLookupOf(query: LidQuery): { lid: string } | { phone: string } {
  if (query.lid !== undefined && query.phone !== undefined) {
    throw errors.badRequest('give either lid or phone, not both');
  }
  if (query.lid !== undefined) {
    const lid = parseLid(query.lid);
    if (lid === null)
      throw errors.badRequest('lid must be a LID: 1 to 20 digits, optionally followed by @lid');
    return { lid };
  }
  if (query.phone !== undefined) return { phone: query.phone };
  throw errors.badRequest('lid or phone is required');
}

/**
 * `GET /v1/contacts/lid` (docs/api.md#contacts, docs/decisions/0038-lid-mappings.md): the phone number behind a LID
 * or the LID of a phone number, from the pairs parley has seen (then from the platform); scope `chat:contacts`.
 */
export async function contactsLidRoute(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { contacts } = app.services.app;
  app.get(
    '/lid',
    {
      config: { scope: 'chat:contacts', instance: 'query' },
      schema: {
        tags,
        operationId: 'getContactLid',
        summary:
          'The phone number behind a LID, or the LID of a phone number (404 when parley has not seen it)',
        querystring: LidQuery,
        response: responses('The phone number and the LID', LidResult, 502),
      },
    },
    async (request) => {
      const found = await contacts.lidMapping(instanceOf(request), lidLookupOf(request.query));
      return ok({ phone: found.phone, lid: lidJid(found.lid) });
    },
  );
}
