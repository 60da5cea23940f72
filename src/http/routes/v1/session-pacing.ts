import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { type Static, Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { instanceOf } from '../../plugins/instance.ts';
import { InstanceQuery, ok, responses } from '../../schemas.ts';

/** Longest pace interval or jitter, ms (one hour). */
const MAX_PACE_MS = 3_600_000;

/** Body of `PUT /v1/session/pacing` (docs/decisions/0013-pacing.md); an omitted field is off. */
export const PacingBody = Type.Object(
  {
    minIntervalMs: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_PACE_MS,
        description: 'least time between two relays of the instance, ms (0: none)',
        examples: [3000],
      }),
    ),
    jitterMs: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_PACE_MS,
        description: 'a random 0..jitterMs ms added to every interval',
        examples: [2000],
      }),
    ),
    newChatsPerDay: Type.Optional(
      Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
        description: 'most relays that open a chat per rolling 24 h (null: no cap)',
        examples: [20],
      }),
    ),
  },
  { title: 'PacingBody', additionalProperties: false },
);
export type PacingBody = Static<typeof PacingBody>;

/** `data` of the pacing operations. */
export const PacingView = Type.Object(
  {
    minIntervalMs: Type.Integer(),
    jitterMs: Type.Integer(),
    newChatsPerDay: Type.Union([Type.Integer(), Type.Null()]),
    paused: Type.Union([
      Type.Object({ reason: Type.String(), until: Type.String({ format: 'date-time' }) }),
      Type.Null(),
    ]),
  },
  { title: 'PacingView' },
);
export type PacingView = Static<typeof PacingView>;

/** The pacing service's view in the API's shape: the pause's end as RFC 3339. */
function pacingView(view: {
  minIntervalMs: number;
  jitterMs: number;
  newChatsPerDay: number | null;
  paused: { reason: string; until: number } | null;
}): PacingView {
  return {
    minIntervalMs: view.minIntervalMs,
    jitterMs: view.jitterMs,
    newChatsPerDay: view.newChatsPerDay,
    paused: view.paused
      ? { reason: view.paused.reason, until: new Date(view.paused.until).toISOString() }
      : null,
  };
}

const tags = ['session'];

/**
 * `GET` and `PUT /v1/session/pacing`: the instance's send pace and the pause a platform restriction set
 * (docs/decisions/0013-pacing.md); scope `chat:session` (docs/decisions/0003-scopes-and-keys.md).
 */
export async function sessionPacingRoutes(fastify: FastifyInstance): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { pacing } = app.services.app;
  const config = { scope: 'chat:session', instance: 'query' } as const;

  app.get(
    '/pacing',
    {
      config,
      schema: {
        tags,
        operationId: 'getSessionPacing',
        summary: "The instance's send pace and the pause in force",
        querystring: InstanceQuery,
        response: responses('The pace (0, 0, null: off) and the pause, if any', PacingView),
      },
    },
    async (request) => ok(pacingView(await pacing.get(instanceOf(request)))),
  );

  app.put(
    '/pacing',
    {
      config,
      schema: {
        tags,
        operationId: 'setSessionPacing',
        summary: "Set the instance's send pace (every send goes through the instance's queue in order)",
        querystring: InstanceQuery,
        body: PacingBody,
        response: responses('The pace now in force', PacingView),
      },
    },
    async (request) => {
      const { minIntervalMs, jitterMs, newChatsPerDay } = request.body;
      return ok(
        pacingView(
          await pacing.set(instanceOf(request), {
            minIntervalMs: minIntervalMs ?? 0,
            jitterMs: jitterMs ?? 0,
            newChatsPerDay: newChatsPerDay ?? null,
          }),
        ),
      );
    },
  );
}
