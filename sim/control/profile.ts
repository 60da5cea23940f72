/**
 * Control API: what the simulated platform holds for an account's own settings (docs/simulator.md, Profile, privacy
 * and blocklist), as the account's clients changed them through the iqs of server/account-iq.ts:
 * - `GET /control/users/{phone}/profile` → `{ pushName, about, avatar, picture }`: `about` '' when none, `avatar`
 *   `{ url, id }` or null, `picture` the JPEG bytes the client uploaded as base64, or null (no picture, or one given
 *   by URL at creation).
 * - `GET /control/users/{phone}/privacy` → every privacy category with its value (`{ last: 'all', … }`).
 * - `GET /control/users/{phone}/blocklist` → `{ phones }`, the blocked users' phones in blocking order.
 * - `GET /control/users/{phone}/chats` → `{ chats, starred }`: the chat state the account's devices set (by chat
 *   JID: `{ archived, pinned, mutedUntil, markedUnread }`, `mutedUntil` epoch ms, -1 for "always", or null) and
 *   the starred messages (`{ chat, id, fromMe }`, in starring order).
 * 404 for an unknown phone.
 */
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { privacyOf } from '../server/account-iq.ts';
import type { SimContext } from '../server/session.ts';
import { Phone } from './schemas.ts';

const PhoneParams = Type.Object({ phone: Phone });

/** Registers the account settings routes on `app`. */
export function registerProfileRoutes(app: FastifyInstance, ctx: SimContext): void {
  app.get<{ Params: Static<typeof PhoneParams> }>(
    '/control/users/:phone/profile',
    { schema: { params: PhoneParams } },
    async (request) => {
      const user = ctx.accounts.require(request.params.phone, 'phone');
      return {
        pushName: user.pushName,
        about: user.about ?? '',
        avatar: user.avatar ?? null,
        picture: user.picture ? user.picture.toString('base64') : null,
      };
    },
  );

  app.get<{ Params: Static<typeof PhoneParams> }>(
    '/control/users/:phone/privacy',
    { schema: { params: PhoneParams } },
    async (request) => privacyOf(ctx.accounts.require(request.params.phone, 'phone')),
  );

  app.get<{ Params: Static<typeof PhoneParams> }>(
    '/control/users/:phone/blocklist',
    { schema: { params: PhoneParams } },
    async (request) => ({ phones: ctx.accounts.require(request.params.phone, 'phone').blocked ?? [] }),
  );

  app.get<{ Params: Static<typeof PhoneParams> }>(
    '/control/users/:phone/chats',
    { schema: { params: PhoneParams } },
    async (request) => {
      const user = ctx.accounts.require(request.params.phone, 'phone');
      return { chats: user.chats ?? {}, starred: user.starred ?? [] };
    },
  );
}
