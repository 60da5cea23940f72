import { pipeline, Transform } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { AuthContext } from '../../app/access.ts';
import { type IdempotencyClaim, parseIdempotencyKey, RequestFingerprint } from '../../app/idempotency.ts';
import { callbackHook } from '../hook-style.ts';
import { isForwarded } from './forward.ts';

/** Request header naming the key (docs/api.md "Idempotency"). */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
/** Response header on an answer replayed from a key. */
export const REPLAYED_HEADER = 'idempotent-replayed';

/** What the hooks know about a request that carries a key. */
interface IdempotentRequest {
  key: string;
  fingerprint: RequestFingerprint;
  /** Held from the preHandler until the answer is kept or the key released. */
  claim: IdempotencyClaim | undefined;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set when an authenticated `POST` under `/v1` (or a gateway path) carries `Idempotency-Key`. */
    idempotency: IdempotentRequest | null;
  }
}

/** The answer body as sent, when it is whole text or bytes (a stream cannot be kept). */
function keptBody(payload: unknown): string | undefined {
  if (payload === undefined || payload === null) return '';
  if (typeof payload === 'string') return payload;
  if (Buffer.isBuffer(payload)) return payload.toString('utf8');
  return undefined;
}

/** The `x-instance-id` header as it arrived (several values joined), or undefined without one. */
function instanceHeaderOf(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** A pass-through stream that feeds every body byte to `fingerprint`. */
function fingerprintBody(payload: NodeJS.ReadableStream, fingerprint: RequestFingerprint): Transform {
  const tee = new Transform({
    transform(chunk: Buffer | string, _encoding, callback) {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      fingerprint.update(bytes);
      callback(null, bytes);
    },
  });
  pipeline(payload, tee, () => undefined);
  return tee;
}

/**
 * The headers of an answer that say what it is, and so are kept with it and sent again by a replay
 * (docs/decisions/0010-idempotency.md): `Preference-Applied` (a send queued under `Prefer: respond-async`, RFC 7240).
 * Headers of the moment (rate limits, request id, `Retry-After`) are the replay's own.
 */
export const KEPT_HEADERS: readonly string[] = ['preference-applied'];

/** The {@link KEPT_HEADERS} `reply` carries, by lowercase name. */
function keptHeadersOf(reply: FastifyReply): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const name of KEPT_HEADERS) {
    const value = reply.getHeader(name);
    if (typeof value === 'string') kept[name] = value;
  }
  return kept;
}

/**
 * The id of the request the `Idempotency-Key` claim of `request` continues (src/app/idempotency.ts
 * `IdempotencyClaim.requestId`, a UUID): the same for a retry that took over the claim of a request whose process
 * died. Undefined for a request without a key, or one another node forwarded here (its claim is held by the node
 * that forwarded it, which forwards under this id: src/http/plugins/forward.ts).
 */
export function idempotentRequestIdOf(request: FastifyRequest): string | undefined {
  const claim = request.idempotency?.claim;
  return claim === undefined ? undefined : claim.requestId;
}

/**
 * `Idempotency-Key` on every authenticated `POST` whose route is under `/v1` (gateway paths are served by their
 * `/v1` twin, so they are covered), Stripe's model (docs/decisions/0010-idempotency.md):
 * - `onRequest` (after auth and rate limit, so replays count against the limit): checks the header (400
 *   `Idempotency-Key must be 1 to 255 printable ASCII characters`). A request another node forwarded is left
 *   alone: the forwarding node claimed the key and keeps the answer it relays;
 * - `preParsing`: feeds the raw body bytes to the request's fingerprint (SHA-256 over method, path with query as
 *   sent, body);
 * - `preHandler` (after validation, before the instance is resolved and the request forwarded): claims the key,
 *   or replays the kept answer with `Idempotent-Replayed: true`, or refuses (409 in progress, 422 reused with a
 *   different request);
 * - `onSend`: keeps an answer below 500 (status, `Content-Type`, the exact body, the headers of
 *   {@link KEPT_HEADERS}), or releases the key (a 400, a 413, a 429, a 5xx that decided the operation's failure), or
 *   ends the claim unfinished for a retry to continue as the same request (any other 5xx; `IdempotencyService.finish`);
 * - `onResponse`: ends a claim still held unfinished (an answer that never reached `onSend`).
 * Requests without the header, other methods and unauthenticated routes are untouched.
 */
export const idempotencyPlugin = fp(
  async (app: FastifyInstance) => {
    const { cluster } = app.services;
    const service = app.services.app.idempotency;
    app.decorateRequest('idempotency', null);

    /** Claims the key of `idempotent`, or replays its kept answer (→ the reply), or refuses. */
    const claimOrReplay = async (
      reply: FastifyReply,
      idempotent: IdempotentRequest,
      auth: AuthContext,
    ): Promise<FastifyReply | undefined> => {
      const start = await service.begin(
        { orgId: auth.org.id, env: auth.env, key: idempotent.key },
        idempotent.fingerprint.digest(),
      );
      if (start.kind === 'run') {
        idempotent.claim = start.claim;
        return undefined;
      }
      const { answer } = start;
      reply.code(answer.status);
      reply.header('content-type', answer.contentType ?? 'application/json; charset=utf-8');
      for (const [name, value] of Object.entries(answer.headers)) reply.header(name, value);
      reply.header(REPLAYED_HEADER, 'true');
      return reply.send(answer.body);
    };
    /**
     * Keeps the answer `payload` under `claim`, or releases the key or ends the claim unfinished as the answer says
     * (`IdempotencyService.finish`; a body that cannot be kept ends it unfinished); never rejects.
     */
    const keep = async (
      request: FastifyRequest,
      reply: FastifyReply,
      payload: unknown,
      claim: IdempotencyClaim,
    ): Promise<void> => {
      const body = keptBody(payload);
      const type = reply.getHeader('content-type');
      try {
        if (body === undefined) await service.release(claim);
        else {
          await service.finish(
            claim,
            {
              status: reply.statusCode,
              contentType: typeof type === 'string' ? type : undefined,
              body,
              headers: keptHeadersOf(reply),
            },
            // Only an operation run on this node decides its failure here: a forward tried (its answer relayed, or
            // lost) may have run on the owner, whose error codes do not reach this node.
            request.forwardId === null ? (request.failureCode ?? undefined) : undefined,
          );
        }
      } catch (error) {
        // Releasing failed (the answer was not to be kept): the key ends at its lock, then a retry runs again.
        request.log.warn({ err: error }, 'releasing an idempotency key failed');
      }
    };
    /** Ends `claim` unfinished (`IdempotencyService.release`); never rejects. */
    const release = (request: FastifyRequest, claim: IdempotencyClaim): Promise<void> =>
      service.release(claim).catch((error: unknown) => {
        request.log.warn({ err: error }, 'releasing an idempotency key failed');
      });

    // Every request passes these hooks and few carry a key: callback style (src/http/hook-style.ts).
    app.addHook('onRequest', (request, _reply, done) => {
      const header = request.headers[IDEMPOTENCY_KEY_HEADER];
      if (
        header !== undefined &&
        request.method === 'POST' &&
        request.auth &&
        request.routeOptions.url?.startsWith('/v1/') &&
        !isForwarded(request, cluster)
      ) {
        const key = parseIdempotencyKey(header);
        request.idempotency = {
          key,
          fingerprint: new RequestFingerprint(
            request.method,
            request.originalUrl,
            instanceHeaderOf(request.headers['x-instance-id']),
            request.auth.instanceIds,
          ),
          claim: undefined,
        };
      }
      done();
    });

    app.addHook('preParsing', (request, _reply, payload, done) => {
      const idempotent = request.idempotency;
      done(null, idempotent ? fingerprintBody(payload, idempotent.fingerprint) : payload);
    });

    app.addHook(
      'preHandler',
      callbackHook((request, reply) => {
        const idempotent = request.idempotency;
        const auth = request.auth;
        return idempotent && auth ? claimOrReplay(reply, idempotent, auth) : undefined;
      }),
    );

    app.addHook('onSend', (request, reply, payload, done) => {
      const claim = request.idempotency?.claim;
      if (!claim || !request.idempotency) {
        done(null, payload);
        return;
      }
      request.idempotency.claim = undefined;
      void keep(request, reply, payload, claim).then(() => done(null, payload));
    });

    app.addHook('onResponse', (request, _reply, done) => {
      const claim = request.idempotency?.claim;
      if (!claim || !request.idempotency) {
        done();
        return;
      }
      request.idempotency.claim = undefined;
      void release(request, claim).then(() => done());
    });
  },
  { name: 'parley-idempotency', dependencies: ['parley-auth', 'parley-services'] },
);
