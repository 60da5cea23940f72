import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ApiError, errors } from '../../../errors.ts';
import { findInstanceByPhone } from '../../../store/instances.ts';
import { resolveInstance, selectorOf } from '../../instance-resolution.ts';
import { authOf } from '../../plugins/auth.ts';
import { Details, InstanceQuery, ok, Phone, responses } from '../../schemas.ts';

/** Body of `POST /v1/sandbox/scan` (DESIGN D9). */
export const ScanBody = Type.Object({
  code: Type.Optional(
    Type.String({ minLength: 1, maxLength: 1024, description: 'must equal the current QR code when given' }),
  ),
  phone: Type.Optional(Phone('the number the simulated owner logs in as; generated when omitted')),
});
export type ScanBody = Static<typeof ScanBody>;

const tags = ['sandbox'];

/**
 * `/v1/sandbox/*` test helpers (DESIGN D9): only for `svc_test_` keys (a live key gets 404), scope
 * `chat:session` (DESIGN D5).
 */
export async function sandboxRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { store, sessions } = app.services;
  const config = { scope: 'chat:session', testOnly: true } as const;

  app.post(
    '/scan',
    {
      config,
      schema: {
        tags,
        summary: 'The simulated account owner scans the current QR code; a HistorySync event follows',
        querystring: InstanceQuery,
        body: ScanBody,
        response: responses(Details, 409),
      },
    },
    async (request) => {
      const instance = await resolveInstance(store.db, authOf(request), selectorOf(request));
      const controls = sessions.existing(instance.id)?.sandbox;
      if (!controls) throw instance.jid !== null ? errors.alreadyLoggedIn() : errors.notConnected();
      const phone = request.body.phone;
      if (phone !== undefined) {
        const holder = await findInstanceByPhone(store.db, instance.env, phone);
        if (holder && holder.id !== instance.id) {
          throw new ApiError('CONFLICT', `phone ${phone} is already linked to another instance`);
        }
      }
      const state = await controls.scan({
        ...(request.body.code === undefined ? {} : { code: request.body.code }),
        ...(phone === undefined ? {} : { phone }),
      });
      return ok({ details: `Logged in as ${state.phone ?? ''}` });
    },
  );
}
