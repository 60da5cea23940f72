import type { FastifyInstance } from 'fastify';
import type { SimContext } from '../server/session.ts';

export function registerControlRoutes(_app: FastifyInstance, _ctx: SimContext): void {}
