import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * What a hook's step may wait for: a promise, or a Fastify reply (thenable, settled once its answer is written).
 * Rejections are errors: parley's code throws nothing else.
 */
export interface Settling {
  then(fulfilled: () => void, rejected: (error: Error) => void): unknown;
}

/** Fastify's `done` of a request hook: no argument to go on, an error to answer with it. */
export type HookDone = (error?: Error) => void;

/**
 * A request hook (`onRequest`, `preValidation`, `preHandler` or `onResponse`) in Fastify's callback style, made of
 * `step`, for a hook that usually returns at once but sometimes waits (a hook that never waits is written in
 * callback style directly: Fastify catches its throw). The step does its work and returns `undefined`, the common
 * case, or returns what it has to wait for (the call of an async function holding the rest). Either way the next
 * hook runs once the step is done; a throw or a rejection is the hook's error, as an async hook's would be.
 * A step that answers the request returns the reply, as an async hook does: a reply is thenable, settled once the
 * answer is written, and the request's hooks stop there (Fastify's runners stop at a sent reply). It must not
 * return `undefined` after `reply.send`: while an `onSend` hook still waits, the reply does not count as sent and
 * the next hook would run.
 *
 * Why not an async hook: Fastify waits for an async hook through `then`, so each one costs every request two
 * promises and a hop through the microtask queue even when it returns at once, and every request passes a dozen of
 * them (docs/decisions/0079-callback-style-request-hooks.md; docs/benchmarks.md, step 96). Callback style is
 * Fastify's own form (its "Hooks" reference).
 */
export function callbackHook(
  step: (request: FastifyRequest, reply: FastifyReply) => Settling | undefined,
): (request: FastifyRequest, reply: FastifyReply, done: HookDone) => void {
  return (request, reply, done) => {
    let waiting: Settling | undefined;
    try {
      waiting = step(request, reply);
    } catch (error) {
      done(error as Error);
      return;
    }
    // `done` is called outside the try: it runs the next hooks, whose own errors are theirs to report.
    if (waiting === undefined) done();
    else
      waiting.then(
        () => done(),
        (error) => done(error),
      );
  };
}
