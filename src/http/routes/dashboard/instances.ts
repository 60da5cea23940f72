import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Instance } from '../../../domain/instance.ts';
import { qrCodeDataUrl } from '../../qr-code.ts';
import { ok } from '../../schemas.ts';
import { PairingCodeBody } from '../v1/session.ts';
import { principalOf } from './guard.ts';
import { summariesFromOwners } from './routing.ts';

const CreateInstanceBody = Type.Object({
  env: Type.Unsafe<'test' | 'live'>({
    type: 'string',
    enum: ['test', 'live'],
    'x-message': '{field} must be one of test, live',
  }),
  name: Type.Optional(Type.String({ maxLength: 60, 'x-message': '{field} must be at most 60 characters' })),
});
/** `:id` of an instance route. */
export const InstanceParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

/**
 * The instance of the route's `:id` when it belongs to the signed-in user's organization.
 * @throws DomainError not_found `instance not found` (also for another organization's instance).
 */
export async function instanceFor(app: FastifyInstance, request: FastifyRequest): Promise<Instance> {
  const { id } = request.params as { id: string };
  return app.services.app.dashboard.instanceOf(principalOf(request).org.id, id);
}

/**
 * Instances of the signed-in user's organization (docs/decisions/0022-dashboard.md): list with status and linked
 * number, create, connect, the QR code (also pushed live by the events stream; members and owners only, as it links a
 * number), the pairing-code alternative,
 * disconnect and logout, through the same session service as `/v1/session/*`, and deletion (owners), through the same
 * instance service as `DELETE /v1/instances/{id}`. On several nodes the list shows each
 * instance's status as its owner sees it, and every route under `/instances/:id` runs on the owner (routing.ts).
 */
export async function instanceRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { dashboard, session, instances } = app.services.app;
  const viewer = { dashboard: 'viewer' } as const;
  const member = { dashboard: 'member' } as const;
  const hidden = { hide: true, params: InstanceParams } as const;

  app.get('/instances', { config: viewer, schema: { hide: true } }, async (request) => {
    const local = await dashboard.instances(principalOf(request).org.id);
    return ok({
      instances: await summariesFromOwners(app, request, local),
      lastEvents: await dashboard.lastEvents(local.map((instance) => instance.id)),
    });
  });

  app.post(
    '/instances',
    { config: member, schema: { hide: true, body: CreateInstanceBody } },
    async (request) => ok(await dashboard.createInstance(principalOf(request).org.id, request.body)),
  );

  app.get('/instances/:id', { config: viewer, schema: hidden }, async (request) =>
    ok(await dashboard.instance(principalOf(request).org.id, request.params.id)),
  );

  app.post('/instances/:id/connect', { config: member, schema: hidden }, async (request) => {
    const instance = await instanceFor(app, request);
    await session.connect(instance, { immediate: true });
    return ok(await dashboard.instance(principalOf(request).org.id, instance.id));
  });

  app.post('/instances/:id/disconnect', { config: member, schema: hidden }, async (request) => {
    const instance = await instanceFor(app, request);
    await session.disconnect(instance);
    return ok(await dashboard.instance(principalOf(request).org.id, instance.id));
  });

  app.post('/instances/:id/logout', { config: member, schema: hidden }, async (request) => {
    const instance = await instanceFor(app, request);
    await session.logout(instance);
    return ok(await dashboard.instance(principalOf(request).org.id, instance.id));
  });

  // Deleting an instance takes its data with it: owners only, as deleting users (docs/decisions/0022-dashboard.md).
  app.delete('/instances/:id', { config: { dashboard: 'owner' }, schema: hidden }, async (request) => {
    const instance = await instanceFor(app, request);
    await instances.remove(instance);
    return ok({ details: 'Instance deleted', id: instance.id });
  });

  // The QR code links a number to this instance (a credential, as a pairing code is): members and owners only.
  app.get('/instances/:id/qr', { config: member, schema: hidden }, async (request) => {
    const instance = await instanceFor(app, request);
    return ok(await qrOf(await session.pairingCode(instance)));
  });

  app.post(
    '/instances/:id/pairing-code',
    { config: member, schema: { ...hidden, body: PairingCodeBody } },
    async (request) => {
      const instance = await instanceFor(app, request);
      return ok({ pairingCode: await session.requestPairingCode(instance, request.body.phone) });
    },
  );
}

/** A pairing code as the page shows it: the PNG data URI, the raw string and its expiry (RFC 3339). */
export async function qrOf(pairing: { code: string; expiresAt: number }) {
  const qrCode = await qrCodeDataUrl(pairing.code);
  return { qrCode, code: pairing.code, expiresAt: new Date(pairing.expiresAt).toISOString() };
}
