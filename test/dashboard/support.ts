import type { LightMyRequestResponse } from 'fastify';
import { adminCreateUser } from '../../src/app/users.ts';
import type { TestApp } from '../support/app.ts';

/** A password long enough for the dashboard's rule. */
export const PASSWORD = 'correct horse battery staple';

/** A signed-in dashboard user driven through `app.inject`: its cookie and CSRF token. */
export interface DashboardClient {
  email: string;
  cookie: string;
  csrf: string;
  /** Calls the dashboard API with the session cookie (and the CSRF token unless `csrf: false`). */
  call(
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    path: string,
    body?: unknown,
    options?: { csrf?: boolean | string; cookie?: string },
  ): Promise<{ status: number; body: any; raw: LightMyRequestResponse }>;
}

/** Creates a dashboard user of the test app's organization with {@link PASSWORD}. */
export async function createUser(t: TestApp, role: 'owner' | 'member' | 'viewer', email?: string) {
  const address = email ?? `${role}-${Math.random().toString(36).slice(2, 8)}@example.com`;
  await adminCreateUser(t.testStore.store.db, { org: t.org.id, email: address, role, password: PASSWORD });
  return address;
}

/** Signs in through `POST /dashboard/api/sign-in`. @throws when the sign-in is not a 200. */
export async function signIn(t: TestApp, email: string, password = PASSWORD): Promise<DashboardClient> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/dashboard/api/sign-in',
    payload: { email, password },
  });
  if (res.statusCode !== 200) throw new Error(`sign-in failed: ${res.statusCode} ${res.body}`);
  const setCookie = [res.headers['set-cookie'] ?? []].flat()[0] ?? '';
  const cookie = setCookie.split(';')[0] ?? '';
  const csrf: string = res.json().data.csrfToken;
  return {
    email,
    cookie,
    csrf,
    async call(method, path, body, options = {}) {
      const token =
        options.csrf === false ? undefined : typeof options.csrf === 'string' ? options.csrf : csrf;
      const raw = await t.app.inject({
        method,
        url: `/dashboard/api${path}`,
        headers: {
          cookie: options.cookie ?? cookie,
          ...(token === undefined ? {} : { 'x-csrf-token': token }),
        },
        ...(body === undefined ? {} : { payload: body as object }),
      });
      let parsed: unknown;
      try {
        parsed = raw.body === '' ? undefined : JSON.parse(raw.body);
      } catch {
        parsed = raw.body;
      }
      return { status: raw.statusCode, body: parsed, raw };
    },
  };
}
