import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { errors } from '../../../domain/errors.ts';
import {
  type AccountProfile,
  MAX_PROFILE_ABOUT,
  MAX_PROFILE_NAME,
  PRIVACY_VALUES,
  type PrivacySettings,
  type ProfileChange,
} from '../../../domain/profile.ts';
import { requireFormat } from '../../../media/detect.ts';
import { checkImagePixels } from '../../../media/image.ts';
import { bodyLimitForBytes, IMAGE_MAX_PIXELS, MB, type MediaRule } from '../../../media/kinds.ts';
import type { MediaTools } from '../../../media/prepare.ts';
import { type MediaFetchLog, readMediaSource } from '../../../media/source.ts';
import { instanceOf } from '../../plugins/instance.ts';
import { InstanceQuery, ok, Phone, responses } from '../../schemas.ts';

/**
 * What `PUT /v1/profile` accepts as `picture` (docs/decisions/0039-profile-privacy-blocklist.md): a still image the
 * platform's picture pipeline takes (it is scaled to 640×640 JPEG before upload), at most 5 MB.
 */
export const PROFILE_PICTURE_RULE: MediaRule = {
  maxBytes: 5 * MB,
  maxLabel: '5 MB',
  formats: ['jpg', 'png', 'webp'],
  formatsLabel: 'JPEG, PNG or WEBP',
};

/**
 * Body cap of `PUT /v1/profile`: the largest picture as (possibly line-wrapped) base64 in a data URI, plus 1 MB for the
 * other fields ({@link bodyLimitForBytes}).
 */
export const PROFILE_BODY_LIMIT = bodyLimitForBytes(PROFILE_PICTURE_RULE.maxBytes);

/** The account's profile (docs/api.md#profile). */
export const ProfileView = Type.Object(
  {
    name: Type.String({
      description: "the account's display (push) name; empty when unknown",
      examples: ['Acme Store'],
    }),
    about: Type.String({ description: "the account's about text; empty when none", examples: ['Open 9–18'] }),
    pictureUrl: Type.Union([Type.String(), Type.Null()], {
      description: 'URL of the profile picture (the platform link expires); null when the account has none',
      examples: ['https://sandbox.parley.invalid/avatars/5511999990001.jpg?id=1612345678'],
    }),
  },
  { title: 'ProfileView' },
);
export type ProfileView = Static<typeof ProfileView>;

/** Body of `PUT /v1/profile`: at least one field; omitted fields are kept. */
export const ProfileBody = Type.Object(
  {
    name: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: MAX_PROFILE_NAME,
        description: `new display name, 1 to ${MAX_PROFILE_NAME} characters`,
        examples: ['Acme Store'],
      }),
    ),
    about: Type.Optional(
      Type.String({
        maxLength: MAX_PROFILE_ABOUT,
        description: `new about text, at most ${MAX_PROFILE_ABOUT} characters`,
        examples: ['Open 9–18'],
      }),
    ),
    picture: Type.Optional(
      Type.String({
        minLength: 1,
        description: `new profile picture: an https:// URL or a data: URI (base64) of a ${PROFILE_PICTURE_RULE.formatsLabel} image, at most ${PROFILE_PICTURE_RULE.maxLabel} and ${IMAGE_MAX_PIXELS.toLocaleString('en-US')} pixels`,
        examples: ['https://example.com/logo.png'],
      }),
    ),
  },
  { title: 'ProfileBody', additionalProperties: false },
);
export type ProfileBody = Static<typeof ProfileBody>;

/** A string from a closed list; the 400 names the field and every allowed value. */
function Choice<T extends string>(values: readonly T[], description: string) {
  return Type.Unsafe<T>({
    type: 'string',
    enum: [...values],
    'x-message': `{field} must be one of ${values.join(', ')}`,
    description: `${description}: ${values.join(', ')}`,
    examples: [values[0]],
  });
}

const privacyFields = {
  lastSeen: Choice(PRIVACY_VALUES.lastSeen, 'who sees when the account was last online'),
  online: Choice(PRIVACY_VALUES.online, 'who sees when the account is online (match_last_seen: as lastSeen)'),
  profilePicture: Choice(PRIVACY_VALUES.profilePicture, 'who sees the profile picture'),
  about: Choice(PRIVACY_VALUES.about, 'who sees the about text'),
  groupAdd: Choice(PRIVACY_VALUES.groupAdd, 'who may add the account to groups'),
  readReceipts: Choice(
    PRIVACY_VALUES.readReceipts,
    'whether read receipts are sent (none: not sent, nor shown)',
  ),
};

/**
 * The account's privacy settings (docs/api.md#profile): `all` everyone, `contacts` the account's contacts,
 * `contact_blacklist` contacts except the ones excluded on the phone, `none` nobody.
 */
export const PrivacyView = Type.Object(privacyFields, { title: 'PrivacyView' });
export type PrivacyView = Static<typeof PrivacyView>;

/** Body of `PUT /v1/profile/privacy`: any non-empty subset of the settings. */
export const PrivacyBody = Type.Partial(Type.Object(privacyFields), {
  title: 'PrivacyBody',
  additionalProperties: false,
});
export type PrivacyBody = Static<typeof PrivacyBody>;

/** Body of `POST /v1/contacts/block` and `/unblock`. */
export const BlockBody = Type.Object(
  { phone: Phone('the user to block or unblock', '5511977776666') },
  { title: 'BlockBody' },
);
export type BlockBody = Static<typeof BlockBody>;

/** `data` of the blocklist routes (docs/api.md#contacts). */
export const BlocklistView = Type.Object(
  {
    phones: Type.Array(Type.String(), {
      description: 'phone numbers the account blocked, ascending',
      examples: [['5511977776666']],
    }),
  },
  { title: 'BlocklistView' },
);
export type BlocklistView = Static<typeof BlocklistView>;

/**
 * The change a `PUT /v1/profile` body asks for (also the dashboard's profile panel): the picture fetched through the
 * outbound guard or decoded, and checked from its bytes ({@link PROFILE_PICTURE_RULE}) and its header: at most
 * 32,000,000 pixels, as every image parley sends (`checkImagePixels`, docs/decisions/0017-messages-and-media.md), since
 * the live engine's platform library decodes it to scale it.
 * @throws DomainError invalid `request body must set at least one of name, about, picture`, `name must not be blank`,
 *   and the picture's errors naming `picture` (source, format, `picture could not be read as an image`); too_large
 *   `picture must be at most 5 MB`, `picture must be at most 32,000,000 pixels, width × height (it has <n>)`.
 */
export async function profileChangeOf(
  guard: MediaTools['guard'],
  body: ProfileBody,
  log: MediaFetchLog,
): Promise<ProfileChange> {
  const { name, about, picture } = body;
  if (name === undefined && about === undefined && picture === undefined) {
    throw errors.badRequest('request body must set at least one of name, about, picture');
  }
  if (name !== undefined && name.trim() === '') throw errors.badRequest('name must not be blank');
  const change: ProfileChange = {};
  if (name !== undefined) change.name = name;
  if (about !== undefined) change.about = about;
  if (picture !== undefined) {
    const source = await readMediaSource(guard, picture, 'picture', PROFILE_PICTURE_RULE, log);
    const format = await requireFormat(source.data, 'picture', PROFILE_PICTURE_RULE);
    await checkImagePixels(source.data, 'picture');
    change.picture = { data: source.data, mimetype: format.mime };
  }
  return change;
}

/** The answer shape of a profile. */
export function profileView(profile: AccountProfile): ProfileView {
  return { name: profile.name, about: profile.about, pictureUrl: profile.pictureUrl };
}

function privacyView(settings: PrivacySettings): PrivacyView {
  return { ...settings };
}

/**
 * `/v1/profile` (docs/api.md#profile): the account's own profile and privacy settings; scope `chat:session`
 * (docs/decisions/0003-scopes-and-keys.md), instance per docs/decisions/0002-instance-resolution.md.
 */
export async function profileRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const services = app.services;
  const { profile } = services.app;
  const config = { scope: 'chat:session', instance: 'query' } as const;
  const tags = ['profile'];

  app.get(
    '',
    {
      config,
      schema: {
        tags,
        operationId: 'getProfile',
        summary: "The account's display name, about text and profile picture",
        querystring: InstanceQuery,
        response: responses('The profile', ProfileView, 409, 502, 503),
      },
    },
    async (request) => ok(profileView(await profile.profile(instanceOf(request)))),
  );

  app.put(
    '',
    {
      config,
      bodyLimit: PROFILE_BODY_LIMIT,
      schema: {
        tags,
        operationId: 'updateProfile',
        summary: "Change the account's display name, about text and/or profile picture",
        querystring: InstanceQuery,
        body: ProfileBody,
        response: responses('The profile after the change', ProfileView, 409, 413, 502, 503),
      },
    },
    async (request) => {
      const change = await profileChangeOf(services.guard, request.body, request.log);
      return ok(profileView(await profile.updateProfile(instanceOf(request), change)));
    },
  );

  app.get(
    '/privacy',
    {
      config,
      schema: {
        tags,
        operationId: 'getPrivacySettings',
        summary: "The account's privacy settings",
        querystring: InstanceQuery,
        response: responses('The privacy settings', PrivacyView, 409, 502, 503),
      },
    },
    async (request) => ok(privacyView(await profile.privacy(instanceOf(request)))),
  );

  app.put(
    '/privacy',
    {
      config,
      schema: {
        tags,
        operationId: 'updatePrivacySettings',
        summary: "Change any of the account's privacy settings",
        querystring: InstanceQuery,
        body: PrivacyBody,
        response: responses('Every privacy setting after the change', PrivacyView, 409, 502, 503),
      },
    },
    async (request) => {
      const change = request.body;
      if (Object.keys(change).length === 0) {
        throw errors.badRequest(
          `request body must set at least one of ${Object.keys(PRIVACY_VALUES).join(', ')}`,
        );
      }
      return ok(privacyView(await profile.updatePrivacy(instanceOf(request), change)));
    },
  );
}

/**
 * The blocklist under `/v1/contacts` (docs/api.md#contacts): `GET /blocklist`, `POST /block`, `POST /unblock`;
 * scope `chat:contacts` (docs/decisions/0003-scopes-and-keys.md).
 */
export async function blocklistRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { profile } = app.services.app;
  const config = { scope: 'chat:contacts', instance: 'query' } as const;
  const tags = ['contacts'];

  app.get(
    '/blocklist',
    {
      config,
      schema: {
        tags,
        operationId: 'getBlocklist',
        summary: 'The numbers the account blocked',
        querystring: InstanceQuery,
        response: responses('The blocked numbers, ascending', BlocklistView, 409, 502, 503),
      },
    },
    async (request) => ok({ phones: await profile.blocklist(instanceOf(request)) }),
  );

  for (const action of ['block', 'unblock'] as const) {
    app.post(
      `/${action}`,
      {
        config,
        schema: {
          tags,
          operationId: action === 'block' ? 'blockContact' : 'unblockContact',
          summary:
            action === 'block'
              ? 'Block a user: their messages and calls no longer reach the account (idempotent)'
              : 'Unblock a user (idempotent)',
          querystring: InstanceQuery,
          body: BlockBody,
          response: responses('The blocklist afterwards', BlocklistView, 409, 422, 502, 503),
        },
      },
      async (request) =>
        ok({ phones: await profile.setBlocked(instanceOf(request), request.body.phone, action) }),
    );
  }
}
