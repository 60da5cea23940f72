import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { callbackHook } from '../../src/http/hook-style.ts';

/**
 * A bare Fastify app with `hook` as its only `preHandler`, a handler that counts its calls and answers `handled`,
 * and an `onSend` hook that waits a turn of the loop before passing the payload on (as parley's `onSend` hooks may).
 */
function appWith(hook: ReturnType<typeof callbackHook>): { app: FastifyInstance; handled: () => number } {
  const app = Fastify();
  let calls = 0;
  app.addHook('preHandler', hook);
  app.addHook('onSend', async (_request, _reply, payload) => {
    await new Promise((resolve) => setImmediate(resolve));
    return payload;
  });
  app.get('/', async () => {
    calls += 1;
    return { handled: true };
  });
  return { app, handled: () => calls };
}

describe('callback-style request hooks (src/http/hook-style.ts)', () => {
  it('goes on to the handler when the step returns at once, and when what it waits for settles', async () => {
    const order: string[] = [];
    for (const step of [
      () => {
        order.push('at once');
        return undefined;
      },
      () =>
        new Promise<void>((resolve) =>
          setImmediate(() => {
            order.push('after a wait');
            resolve();
          }),
        ),
    ]) {
      const { app, handled } = appWith(callbackHook(step));
      const response = await app.inject({ method: 'GET', url: '/' });
      assert.equal(response.statusCode, 200);
      assert.deepEqual(response.json(), { handled: true });
      assert.equal(handled(), 1);
      await app.close();
    }
    assert.deepEqual(order, ['at once', 'after a wait']);
  });

  it('answers with the error a step throws or rejects with, and never runs the handler', async () => {
    const refused = Object.assign(new Error('refused here'), { statusCode: 403 });
    for (const step of [
      () => {
        throw refused;
      },
      async () => {
        await new Promise((resolve) => setImmediate(resolve));
        throw refused;
      },
    ]) {
      const { app, handled } = appWith(callbackHook(step));
      const response = await app.inject({ method: 'GET', url: '/' });
      assert.equal(response.statusCode, 403);
      assert.equal(response.json().message, 'refused here');
      assert.equal(handled(), 0);
      await app.close();
    }
  });

  it('stops at a reply the step sent and returned, though an onSend hook still waited when it returned', async () => {
    for (const waits of [false, true]) {
      const { app, handled } = appWith(
        callbackHook((_request, reply) => {
          const answer = () => reply.code(202).send({ early: true });
          if (!waits) return answer();
          return new Promise((resolve) => setImmediate(resolve)).then(answer);
        }),
      );
      const response = await app.inject({ method: 'GET', url: '/' });
      assert.equal(response.statusCode, 202, `waits: ${waits}`);
      assert.deepEqual(response.json(), { early: true });
      assert.equal(handled(), 0, 'the handler never ran');
      await app.close();
    }
  });
});
