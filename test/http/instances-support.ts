import { adminCreateOrg } from '../../src/app/organizations.ts';
import type { TestApp } from '../support/app.ts';

/** parley's error envelope with `code` and `message` (docs/api.md#errors), as the instance routes answer it. */
export const bad = (code: number, message: string) => ({ error: { code, message } });

/** The plan an organization of {@link organizationOn} is created on (docs/decisions/0029-instances-over-the-api.md). */
export interface PlanChoice {
  plan: 'free' | 'pro' | 'enterprise';
  perMinute?: number;
  perDay?: number;
  maxInstances?: number;
}

/**
 * A new organization of `t`'s store on `plan`, with a key of `env` whose only scope is `instances:manage`.
 * The organization's name is random, so suites may call it as often as they need.
 */
export async function organizationOn(t: TestApp, plan: PlanChoice, env: 'test' | 'live' = 'test') {
  const name = `org-${Math.random().toString(36).slice(2, 10)}`;
  const org = await adminCreateOrg(t.testStore.store.db, { name, ...plan });
  const key = await t.newKey({ org: org.id, env, scopes: ['instances:manage'] });
  return { org, key };
}
