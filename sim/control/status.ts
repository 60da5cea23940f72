/**
 * Control API: status updates (stories) on a simulated user's phone (docs/simulator.md). What the phone shows:
 * the statuses it received from linked accounts (messaging/status-relay.ts), oldest first. What the phone does:
 * view one, which sends the poster a read receipt from `status@broadcast` with the viewer as `participant` (by
 * LID), the `<receipt>` Baileys' messages-recv.js handleReceipt reports as `message-receipt.update` for the
 * status.
 */
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { STATUS_JID } from '../messaging/status-relay.ts';
import { lidJid } from '../model/accounts.ts';
import type { SimContext } from '../server/session.ts';
import { ControlError } from './errors.ts';
import { sendToAccount } from './messaging.ts';
import { Phone } from './schemas.ts';

const PhoneParams = Type.Object({ phone: Phone });

const View = Type.Object(
  {
    phone: Phone,
    from: Phone,
    id: Type.String({ minLength: 1, maxLength: 128 }),
  },
  { additionalProperties: false },
);

/** Registers the status routes. */
export function registerStatusRoutes(app: FastifyInstance, ctx: SimContext): void {
  app.get<{ Params: Static<typeof PhoneParams> }>(
    '/control/users/:phone/statuses',
    { schema: { params: PhoneParams } },
    async (request) => ctx.accounts.require(request.params.phone, 'phone').inbox.filter((e) => e.status),
  );

  app.post<{ Body: Static<typeof View> }>(
    '/control/statuses/view',
    { schema: { body: View } },
    async (request) => {
      const { phone, from, id } = request.body;
      const viewer = ctx.accounts.require(phone, 'phone');
      const poster = ctx.accounts.require(from, 'from');
      const entry = viewer.inbox.find((e) => e.status && e.id === id && e.from === from);
      if (!entry) throw new ControlError(404, `id: ${phone} has no status ${id} from ${from}`);
      const t = String(Math.floor(Date.now() / 1000));
      const sockets = sendToAccount(poster, () => ({
        tag: 'receipt',
        attrs: { from: STATUS_JID, participant: lidJid(viewer.lid), id, type: 'read', t },
      }));
      if (sockets === 0) throw new ControlError(409, `from: account ${from} has no open socket`);
      entry.viewedAt = new Date().toISOString();
      return { sockets };
    },
  );
}
