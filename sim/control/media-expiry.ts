/**
 * Control API, the life of media files after they were sent:
 * - `DELETE /control/media`: the platform's media links expire (a file is gone from its media hosts after a
 *   while); this makes it happen now. The media server forgets every file it stores, so a device that downloads
 *   one later gets 404, as it does for expired media, and then asks the sender's phone to upload it again
 *   (messaging/media-retry.ts). Answers `{ removed }`, the number of files forgotten; `409` when the simulator
 *   runs without its media server.
 * - `DELETE /control/users/{phone}/media`: the user's phone deletes the media it sent (it no longer has the
 *   files), so a re-upload request for one of them is answered `NOT_FOUND`. Answers `{ removed }`, the number of
 *   files the phone had; `404` for an unknown user.
 * - `GET /control/media/retries`: the re-upload requests devices sent, oldest first (`{ retries: [{ id, from,
 *   device, sender, outcome, directPath, at }] }`, messaging/media-retry.ts `MediaRetryRecord`).
 */
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { SimContext } from '../server/session.ts';
import { ControlError } from './errors.ts';
import { Phone } from './schemas.ts';

const UserParams = Type.Object({ phone: Phone });

/** Registers `DELETE /control/media`, `DELETE /control/users/{phone}/media` and `GET /control/media/retries`. */
export function registerMediaExpiryRoutes(app: FastifyInstance, ctx: SimContext): void {
  app.delete('/control/media', async () => {
    if (!ctx.media) throw new ControlError(409, 'the simulator runs without a media server');
    return { removed: ctx.media.clear() };
  });

  app.delete<{ Params: Static<typeof UserParams> }>(
    '/control/users/:phone/media',
    { schema: { params: UserParams } },
    async (request) => {
      const user = ctx.accounts.require(request.params.phone, 'phone');
      const removed = user.keptMedia?.size ?? 0;
      user.keptMedia?.clear();
      return { removed };
    },
  );

  app.get('/control/media/retries', async () => ({ retries: ctx.mediaRetries }));
}
