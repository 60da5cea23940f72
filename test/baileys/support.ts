import { randomBytes, randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import pino from 'pino';
import type { Clock } from '../../src/domain/clock.ts';
import type { EngineEvent, EngineMessage } from '../../src/domain/messages.ts';
import type { EngineSessionContext } from '../../src/engines/engine.ts';
import { SecretBox } from '../../src/security/secrets.ts';
import { SqlAuthStateStore } from '../../src/store/engine-auth.ts';
import { createInstance } from '../../src/store/instances.ts';
import { createOrganization } from '../../src/store/organizations.ts';
import { createTestStore, type TestDialect, type TestStore } from '../support/store.ts';

/**
 * The `emitWith` of a test's live session context: the live engine keeps no platform state with its events, so a
 * call is a bug the test should see (it rejects).
 */
export function noEmitWith(): Promise<void> {
  return Promise.reject(new Error('the live engine records no state with its events (emitWith)'));
}

/** A silent logger with the shape parley passes around. */
export function silentLogger(): FastifyBaseLogger {
  return pino({ level: process.env.BAILEYS_TEST_LOG ?? 'silent' });
}

/** One JSON log line as pino writes it (`level` 30 info, 40 warn, 50 error). */
export interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

/** A logger at debug level whose lines are kept in `lines` (parsed), for asserting what was logged. */
export function capturingLogger(): { logger: FastifyBaseLogger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = pino(
    { level: 'debug' },
    {
      write: (chunk: string) => {
        lines.push(JSON.parse(chunk) as LogLine);
      },
    },
  );
  return { logger, lines };
}

/** A migrated store with one organization and `count` live instances. */
export interface LiveFixture {
  test: TestStore;
  box: SecretBox;
  instanceIds: string[];
}

/**
 * Creates a store (SQLite or PostgreSQL) with `count` live instances; `options` go to the store
 * (../support/store.ts `createTestStore`: a fault hook that sees every statement's SQL text).
 */
export async function liveFixture(
  dialect: TestDialect,
  count = 1,
  options: Parameters<typeof createTestStore>[1] = {},
): Promise<LiveFixture> {
  const test = await createTestStore(dialect, options);
  const org = await createOrganization(test.store.db, { name: `org-${randomUUID()}`, plan: 'free' });
  const instanceIds: string[] = [];
  for (let i = 0; i < count; i++) {
    const instance = await createInstance(test.store.db, { orgId: org.id, env: 'live', name: `live-${i}` });
    instanceIds.push(instance.id);
  }
  return { test, box: new SecretBox(randomBytes(32)), instanceIds };
}

/** A session context whose emitted events and logged lines are kept for assertions. */
export interface RecordingContext {
  context: EngineSessionContext;
  events: EngineEvent[];
  messages: Map<string, EngineMessage>;
}

/** Builds the context parley's session manager would pass (auth store sealed with `box`). */
export function recordingContext(
  fixture: LiveFixture,
  instanceId: string,
  clock: Clock = Date.now,
): RecordingContext {
  const events: EngineEvent[] = [];
  const messages = new Map<string, EngineMessage>();
  const context: EngineSessionContext = {
    instanceId,
    env: 'live',
    auth: new SqlAuthStateStore(fixture.test.store.db, fixture.box, instanceId),
    emit: async (event) => {
      events.push(event);
      if (event.type === 'message') messages.set(event.message.id, event.message);
    },
    emitWith: noEmitWith,
    findMessage: async (id) => messages.get(id),
    logger: silentLogger(),
    clock,
  };
  return { context, events, messages };
}

/**
 * Waits until `check` holds, failing after `ms` of wall time. Polls with `setImmediate` (plus a real 1 ms pause via
 * the event loop), so it keeps working while a test mocks `setTimeout`.
 */
export async function until(check: () => boolean, ms = 2_000, what = 'condition'): Promise<void> {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Like {@link until} for an asynchronous check (e.g. a store query). */
export async function untilAsync(
  check: () => Promise<boolean>,
  what = 'condition',
  ms = 2_000,
): Promise<void> {
  const start = Date.now();
  while (!(await check())) {
    if (Date.now() - start > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}
