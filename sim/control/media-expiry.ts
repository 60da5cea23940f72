/**
 * `DELETE /control/media`: the platform's media links expire (a file is gone from its media hosts after a while);
 * this makes it happen now. The media server forgets every file it stores, so a device that downloads one later
 * gets 404, as it does for expired media. Answers `{ removed }`, the number of files forgotten; `409` when the
 * simulator runs without its media server.
 */
import type { FastifyInstance } from 'fastify';
import type { SimContext } from '../server/session.ts';
import { ControlError } from './errors.ts';

/** Registers `DELETE /control/media`. */
export function registerMediaExpiryRoutes(app: FastifyInstance, ctx: SimContext): void {
  app.delete('/control/media', async () => {
    if (!ctx.media) throw new ControlError(409, 'the simulator runs without a media server');
    return { removed: ctx.media.clear() };
  });
}
