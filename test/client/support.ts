import { after, before } from 'node:test';
import { createTestApp, loginSandbox, type TestApp } from '../support/app.ts';
import { builtClient, type ClientModule } from '../support/client.ts';
import type { TestDialect } from '../support/store.ts';
import { ENTERPRISE } from '../support/stream-events.ts';

/**
 * What the @parley/client suites share: a `fetch` that records and can replace answers, parley's error answer, and
 * a listening parley with a linked sandbox instance on one store dialect.
 */

/** The `fetch` the client takes (its `fetch` option). */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** One request the client made through {@link recordingFetch}, and what came back. */
export interface Seen {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | undefined;
  status: number | 'network error';
  replayed: string | null;
}

/**
 * A `fetch` that records every attempt and lets `intercept` replace an answer. `intercept(attempt, real)` gets the
 * attempt and a function sending it for real; it returns the answer the client sees, or throws (a network failure).
 */
export function recordingFetch(
  intercept?: (
    attempt: Seen,
    index: number,
    real: () => Promise<Response>,
    init: RequestInit,
  ) => Promise<Response>,
): { fetch: FetchLike; seen: Seen[] } {
  const seen: Seen[] = [];
  const fetcher: FetchLike = async (input, init) => {
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    const attempt: Seen = {
      method: init.method ?? 'GET',
      url: input,
      headers,
      body: typeof init.body === 'string' ? init.body : undefined,
      status: 'network error',
      replayed: null,
    };
    seen.push(attempt);
    const real = async () => {
      const response = await fetch(input, init);
      attempt.status = response.status;
      attempt.replayed = response.headers.get('idempotent-replayed');
      return response;
    };
    return intercept ? intercept(attempt, seen.length - 1, real, init) : real();
  };
  return { fetch: fetcher, seen };
}

/** A parley error answer as the server writes it. */
export function errorAnswer(status: number, message: string, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify({ error: { code: status, message } }), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  });
}

/** A registered sandbox recipient. */
export const RECIPIENT = '5511988887777';
/** A number the sandbox reports as not registered on the platform. */
export const UNREGISTERED = '5511977770000';

/** A listening parley for a client suite: its test app, its base URL and the built client (set in `before`). */
export interface RunningParley {
  readonly t: TestApp;
  readonly baseUrl: string;
  readonly client: ClientModule;
  /** How many messages of the instance hold `text` (a `like` match on the stored content). */
  stored(text: string): Promise<number>;
  /** A client of this parley with its test key, and `options` (any field of the client's own options) over those. */
  clientWith(options?: Partial<ClientOptions>): ParleyClient;
}

/** The options `createParleyClient` takes. */
type ClientOptions = Parameters<ClientModule['createParleyClient']>[0];
/** The client `createParleyClient` makes. */
type ParleyClient = ReturnType<ClientModule['createParleyClient']>;

/**
 * Registers, in the calling `describe`, the `before` that builds @parley/client as shipped and starts parley on
 * `dialect` listening on a free loopback port with a linked sandbox instance, on the enterprise plan (the manual
 * clock never moves, so a minute window would not reset during a suite), and the `after` that closes it.
 * → the handle, whose fields are read inside the tests (they are unset before `before` ran).
 */
export function runningParley(dialect: TestDialect): RunningParley {
  let t: TestApp | undefined;
  let baseUrl: string | undefined;
  let client: ClientModule | undefined;
  before(async () => {
    client = (await builtClient()).module;
    t = await createTestApp({ dialect, plan: ENTERPRISE });
    baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
    await loginSandbox(t);
  });
  after(() => t?.close());
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('runningParley: read before its before hook ran');
    return value;
  };
  return {
    get t() {
      return started(t);
    },
    get baseUrl() {
      return started(baseUrl);
    },
    get client() {
      return started(client);
    },
    clientWith(options = {}) {
      return started(client).createParleyClient({
        baseUrl: started(baseUrl),
        apiKey: started(t).key,
        ...options,
      });
    },
    async stored(text) {
      const app = started(t);
      const rows = await app.testStore.store.db
        .selectFrom('messages')
        .select('id')
        .where('instance_id', '=', app.instance.id)
        .where('content', 'like', `%${text}%`)
        .execute();
      return rows.length;
    },
  };
}
