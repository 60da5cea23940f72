import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { EngineEvent } from '../../src/domain/messages.ts';
import type { EventProjection } from '../../src/events/recorder.ts';
import { createTestApp, type TestApp, type TestAppOptions } from '../support/app.ts';

/** Helpers shared by the message, sandbox and media suites. */

/** The account phone the suites log in as. */
export const OWN = '5511999990001';
/** A registered peer (default world: every number not ending in 0000). */
export const PEER = '5511999990002';
/** An unregistered number (ends in 0000, docs/decisions/0004-sandbox.md). */
export const UNREGISTERED = '5511999990000';

/** An error envelope (docs/api.md#errors). */
export const bad = (status: number, message: string) => ({ error: { code: status, message } });

/** Bytes of a committed media fixture. */
export function fixture(name: string): Buffer {
  return readFileSync(new URL(`../fixtures/media/${name}`, import.meta.url));
}

/** A base64 data URI of `data` declared as `mime` (the declared type is never trusted). */
export function dataUri(data: Buffer, mime = 'application/octet-stream'): string {
  return `data:${mime};base64,${data.toString('base64')}`;
}

/** A test app on an enterprise plan with room for many requests (the suites are not about rate limits). */
export function appFor(dialect: TestAppOptions['dialect'], options: TestAppOptions = {}): Promise<TestApp> {
  return createTestApp({
    dialect,
    plan: { plan: 'enterprise', perMinute: 1_000_000, perDay: 10_000_000 },
    ...options,
  });
}

/** Every engine event recorded for an instance, in order (a projection added to the app's recorder). */
export function captureEvents(t: TestApp): { events: { instanceId: string; event: EngineEvent }[] } {
  const captured = { events: [] as { instanceId: string; event: EngineEvent }[] };
  const spy: EventProjection = {
    name: 'test-capture',
    async apply(_trx, instanceId, event) {
      captured.events.push({ instanceId, event });
    },
  };
  t.services.recorder.use(spy);
  return captured;
}

/** The stored row of message `id` of the app's instance (or `instanceId`). */
export async function messageRow(t: TestApp, id: string, instanceId = t.instance.id) {
  return t.services.store.db
    .selectFrom('messages')
    .selectAll()
    .where('instance_id', '=', instanceId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/** The stored send job `id` of the app's instance, every column. @throws when there is none. */
export function sendJobRow(t: TestApp, id: string) {
  return t.services.store.db
    .selectFrom('send_jobs')
    .selectAll()
    .where('instance_id', '=', t.instance.id)
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
}

/** The id of a synchronous send of the app's instance still pending (waiting its turn), if one is stored. */
export async function pendingSyncJobId(t: TestApp): Promise<string | undefined> {
  const row = await t.services.store.db
    .selectFrom('send_jobs')
    .select('id')
    .where('instance_id', '=', t.instance.id)
    .where('mode', '=', 'sync')
    .where('status', '=', 'pending')
    .executeTakeFirst();
  return row?.id;
}

/**
 * The stored content of message `id` of the app's instance, parsed.
 * @throws an assertion error when no row is stored.
 */
export async function storedContent(t: TestApp, id: string) {
  const row = await messageRow(t, id);
  assert.ok(row, `message ${id} stored`);
  return JSON.parse(row.content);
}

/** RFC 3339 UTC with milliseconds and `Z` (docs/decisions/0001-envelope-and-error-codes.md). */
export const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
/** The platform's id shape for the account's own messages (docs/decisions/0017-messages-and-media.md). */
export const OWN_ID = /^3EB0[0-9A-F]{18}$/;

/** The stored webhook bodies of `type` events of the instance (parsed), in sequence order. */
export async function storedBodies(t: TestApp, type: string, instanceId = t.instance.id): Promise<any[]> {
  const rows = await t.services.store.db
    .selectFrom('webhook_events')
    .select(['payload'])
    .where('instance_id', '=', instanceId)
    .where('type', '=', type)
    .orderBy('sequence')
    .execute();
  return rows.map((row) => JSON.parse(row.payload));
}
