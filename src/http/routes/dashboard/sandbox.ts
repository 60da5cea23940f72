import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { ok } from '../../schemas.ts';
import { InboundBody, PresenceBody, ReceiptBody, ScanBody } from '../v1/sandbox.ts';
import { InstanceParams, instanceFor } from './instances.ts';

/**
 * The sandbox helpers of a test instance (docs/decisions/0004-sandbox.md, docs/decisions/0022-dashboard.md): scan the
 * QR, an inbound message, a receipt, a presence, through the same sandbox service as `/v1/sandbox/*` (a live instance
 * answers 404). Members and owners.
 */
export async function sandboxRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { sandbox } = app.services.app;
  const config = { dashboard: 'member' } as const;
  const params = InstanceParams;

  app.post(
    '/instances/:id/sandbox/scan',
    { config, schema: { hide: true, params, body: ScanBody } },
    async (request) => {
      const phone = await sandbox.scan(await instanceFor(app, request), request.body);
      return ok({ details: `Scanned: logged in as ${phone}` });
    },
  );

  app.post(
    '/instances/:id/sandbox/inbound',
    { config, schema: { hide: true, params, body: InboundBody } },
    async (request) => {
      const message = await sandbox.inbound(await instanceFor(app, request), request.body);
      return ok({ id: message.id });
    },
  );

  app.post(
    '/instances/:id/sandbox/receipt',
    { config, schema: { hide: true, params, body: ReceiptBody } },
    async (request) => {
      await sandbox.receipt(await instanceFor(app, request), request.body);
      return ok({ details: `Receipt ${request.body.state} sent` });
    },
  );

  app.post(
    '/instances/:id/sandbox/presence',
    { config, schema: { hide: true, params, body: PresenceBody } },
    async (request) => {
      await sandbox.presence(await instanceFor(app, request), request.body);
      return ok({ details: `Presence ${request.body.state} sent` });
    },
  );
}
