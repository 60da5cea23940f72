import fastifyCookie from '@fastify/cookie';
import type { FastifyInstance } from 'fastify';
import { accountRoutes } from './account.ts';
import { conversationRoutes } from './conversations.ts';
import { endpointRoutes } from './endpoints.ts';
import { eventRoutes } from './events.ts';
import { addDashboardGuard } from './guard.ts';
import { healthRoutes } from './health.ts';
import { instanceRoutes } from './instances.ts';
import { keyRoutes } from './keys.ts';
import { profileRoutes } from './profile.ts';
import { addInstanceRouting } from './routing.ts';
import { sandboxRoutes } from './sandbox.ts';
import { staticRoutes } from './static.ts';
import { userRoutes } from './users.ts';
import { webhookRoutes } from './webhooks.ts';

/**
 * The dashboard (docs/decisions/0022-dashboard.md): its JSON API under `/dashboard/api` (session cookie and CSRF
 * token, never an API key; see guard.ts) and its single page under `/dashboard/`. Registered in its own context, so
 * the cookie parser and the session guard apply to these routes only. On several nodes, a route under
 * `/instances/:id` runs on the node holding that instance's session (see routing.ts).
 */
export async function dashboardRoutes(app: FastifyInstance, options: { root?: string }): Promise<void> {
  await app.register(fastifyCookie);
  await app.register(
    async (api) => {
      addDashboardGuard(api);
      addInstanceRouting(api);
      await api.register(accountRoutes);
      await api.register(instanceRoutes);
      await api.register(webhookRoutes);
      await api.register(endpointRoutes);
      await api.register(sandboxRoutes);
      await api.register(keyRoutes);
      await api.register(userRoutes);
      await api.register(eventRoutes);
      await api.register(conversationRoutes);
      await api.register(healthRoutes);
      await api.register(profileRoutes);
    },
    { prefix: '/dashboard/api' },
  );
  await app.register(staticRoutes, options);
}
