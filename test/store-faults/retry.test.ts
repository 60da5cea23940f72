/**
 * The retry primitive of recording (src/sessions/record-retry.ts), the backlog (src/sessions/backlog.ts) and the
 * classification of store errors (src/store/faults.ts), without a store (docs/decisions/0011-store-faults.md).
 */
import assert from 'node:assert/strict';
import { describe, it, mock } from 'node:test';
import SQLite from 'better-sqlite3';
import { DomainError, errors, STORE_UNAVAILABLE } from '../../src/domain/errors.ts';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { RecordBacklog } from '../../src/sessions/backlog.ts';
import {
  isPermanentStoreError,
  isTransientStoreError,
  RECORD_RETRY,
  type RecordRetryPolicy,
  recordRetryDelayMs,
  recordWithRetry,
} from '../../src/sessions/record-retry.ts';
import { isStoreUnavailableError, outcomeUnknown, untilStoreAnswers } from '../../src/store/faults.ts';
import { capturingLogger } from '../baileys/support.ts';

const coded = (code: string, message = code) => Object.assign(new Error(message), { code });

function event(id: string): EngineEvent {
  const jid = '5511988887777@s.whatsapp.net';
  return {
    type: 'message',
    message: {
      id,
      source: { chat: jid, sender: jid, isFromMe: false, isGroup: false },
      pushName: 'Ana',
      timestamp: 1_700_000_000_000,
      content: { kind: 'text', text: `body ${id}` },
    },
  };
}

/** Waits of 1 ms doubling to 2 ms: fast, with the shape of the real policy. */
const FAST: RecordRetryPolicy = { baseDelayMs: 1, maxDelayMs: 2, unknownAttempts: 5, random: () => 0.5 };

describe('recording retry', () => {
  it('doubles from the base wait, stops doubling at the cap, ±20 % jitter', () => {
    const policy = (r: number): RecordRetryPolicy => ({ ...RECORD_RETRY, random: () => r });
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 7, 8, 50, 5_000].map((n) => recordRetryDelayMs(n, policy(0.5))),
      [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000],
    );
    assert.equal(recordRetryDelayMs(40, policy(0)), 4000);
    assert.equal(recordRetryDelayMs(40, policy(0.999)), 5998);
  });

  it('retries an unreachable store without limit: 200 failures, then recorded', async () => {
    const { logger, lines } = capturingLogger();
    let tries = 0;
    await recordWithRetry(
      {
        emit: async () => {
          tries += 1;
          if (tries <= 200) throw errors.storeUnavailable(coded('ECONNREFUSED'));
        },
        logger,
      },
      event('3EB0A'),
      FAST,
    );
    assert.equal(tries, 201);
    const retries = lines.filter((l) => l.msg === 'recording an event failed; retrying');
    assert.deepEqual(
      retries.map((l) => l.attempt),
      [1, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200],
      'the first failure and every tenth are logged',
    );
    assert.ok(!JSON.stringify(lines).includes('body 3EB0A'), 'no body is logged');
    assert.equal(lines.filter((l) => l.msg === 'recorded an event after retrying').length, 1);
  });

  it('a permanent error is raised at once; an unknown one after unknownAttempts; a bound applies to all', async () => {
    const { logger } = capturingLogger();
    const failing = (error: Error) => {
      let tries = 0;
      return {
        context: {
          emit: async () => {
            tries += 1;
            throw error;
          },
          logger,
        },
        tries: () => tries,
      };
    };
    const permanent = failing(coded('23505', 'duplicate key'));
    await assert.rejects(recordWithRetry(permanent.context, event('p'), FAST), /duplicate key/);
    assert.equal(permanent.tries(), 1);
    const unknown = failing(new Error('something else'));
    await assert.rejects(recordWithRetry(unknown.context, event('u'), FAST), /something else/);
    assert.equal(unknown.tries(), 5);
    const bounded = failing(coded('ECONNRESET'));
    await assert.rejects(
      recordWithRetry(bounded.context, event('b'), { ...FAST, attempts: 3 }),
      /ECONNRESET/,
    );
    assert.equal(bounded.tries(), 3);
  });

  it('an abort (shutdown) ends the wait, makes one last try and raises', async () => {
    const { logger } = capturingLogger();
    const controller = new AbortController();
    let tries = 0;
    const recording = recordWithRetry(
      {
        emit: async () => {
          tries += 1;
          if (tries === 2) controller.abort();
          throw errors.storeUnavailable();
        },
        logger,
      },
      event('s'),
      { ...RECORD_RETRY, random: () => 0.5 },
      { signal: controller.signal },
    );
    await assert.rejects(recording, (error: unknown) => error instanceof DomainError);
    assert.equal(tries, 2);
  });

  it('keeps the order of one instance: a caller awaiting each event records them in order across failures', async () => {
    const { logger } = capturingLogger();
    const committed: string[] = [];
    let failuresLeft = 30;
    const context = {
      emit: async (e: EngineEvent) => {
        if (failuresLeft-- > 0) throw coded('57P01', 'terminating connection due to administrator command');
        if (e.type === 'message') committed.push(e.message.id);
      },
      logger,
    };
    // As the live engine's queue does: each event after the previous one resolved.
    let tail = Promise.resolve();
    for (const id of ['A', 'B', 'C', 'D']) tail = tail.then(() => recordWithRetry(context, event(id), FAST));
    await tail;
    assert.deepEqual(committed, ['A', 'B', 'C', 'D']);
  });

  it('classifies store errors: unreachable, transient, permanent', () => {
    for (const unavailable of [
      coded('ECONNREFUSED'),
      coded('ECONNRESET'),
      coded('ETIMEDOUT'),
      coded('57P01'),
      coded('57P02'),
      coded('57P03'),
      coded('08006'),
      coded('08001'),
      coded('53300'),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
      new SQLite.SqliteError('database is locked', 'SQLITE_BUSY'),
      new SQLite.SqliteError('disk I/O error', 'SQLITE_IOERR_WRITE'),
      errors.storeUnavailable(),
    ]) {
      assert.equal(isStoreUnavailableError(unavailable), true, unavailable.message);
      assert.equal(isTransientStoreError(unavailable), true, unavailable.message);
      assert.equal(isPermanentStoreError(unavailable), false, unavailable.message);
    }
    for (const transient of [coded('40001'), coded('40P01')]) {
      assert.equal(isStoreUnavailableError(transient), false);
      assert.equal(isTransientStoreError(transient), true);
    }
    for (const permanent of [
      coded('23505'),
      coded('22P02'),
      coded('42P01'),
      new SQLite.SqliteError('UNIQUE constraint failed', 'SQLITE_CONSTRAINT_UNIQUE'),
      new SQLite.SqliteError('datatype mismatch', 'SQLITE_MISMATCH'),
      new TypeError('x is undefined'),
    ]) {
      assert.equal(isStoreUnavailableError(permanent), false, permanent.message);
      assert.equal(isTransientStoreError(permanent), false, permanent.message);
      assert.equal(isPermanentStoreError(permanent), true, permanent.message);
    }
    assert.equal(isStoreUnavailableError(new DomainError('conflict', 'x')), false);
    // a socket the server closed under a write: retried, never taken for a data error
    assert.equal(isPermanentStoreError(coded('EPIPE')), false);
    for (const network of [
      'ENETDOWN',
      'ENETRESET',
      'EHOSTDOWN',
      'EPROTO',
      'ERR_SSL_DECRYPTION_FAILED_OR_BAD_RECORD_MAC',
    ]) {
      assert.equal(isStoreUnavailableError(coded(network)), true, network);
    }
    const raised = errors.storeUnavailable(coded('ECONNREFUSED'));
    assert.deepEqual(
      { code: raised.code, message: raised.message, retryAfter: raised.retryAfter },
      { code: 'store_unavailable', message: STORE_UNAVAILABLE, retryAfter: 5 },
    );
  });
});

describe('a statement whose outcome is unknown', () => {
  it('is one a remote store lost mid-statement; never a SQLite error, an answered refusal or an unwrapped error', () => {
    for (const lost of [
      coded('ECONNRESET'),
      coded('EPIPE'),
      coded('EPROTO'),
      coded('ERR_SSL_DECRYPTION_FAILED_OR_BAD_RECORD_MAC'),
      coded('08006'),
      coded('57P01'),
      new Error('Connection terminated unexpectedly'),
    ]) {
      assert.equal(outcomeUnknown(errors.storeUnavailable(lost)), true, lost.message);
      assert.equal(outcomeUnknown(lost), false, `${lost.message}, not classified by the store`);
    }
    for (const known of [
      new SQLite.SqliteError('database is locked', 'SQLITE_BUSY'),
      new SQLite.SqliteError('disk I/O error', 'SQLITE_IOERR_WRITE'),
      coded('53300'),
      new Error('timeout exceeded when trying to connect'),
    ]) {
      assert.equal(outcomeUnknown(errors.storeUnavailable(known)), false, known.message);
    }
    assert.equal(outcomeUnknown(errors.storeUnavailable()), false, 'no cause');
  });
});

describe('waiting out an unreachable store until it answers', () => {
  const unreachable = () => errors.storeUnavailable(coded('ECONNREFUSED'));

  it('tries again after each unreachable answer, then returns what the store answered', async () => {
    let calls = 0;
    const value = await untilStoreAnswers(
      async () => {
        calls += 1;
        if (calls < 3) throw unreachable();
        return 'stored';
      },
      Date.now,
      Number.POSITIVE_INFINITY,
    );
    assert.deepEqual({ value, calls }, { value: 'stored', calls: 3 });
  });

  it('raises any other error at once, and an unreachable one once the bound has passed', async () => {
    let calls = 0;
    const refused = new Error('UNIQUE constraint failed');
    await assert.rejects(
      untilStoreAnswers(
        async () => {
          calls += 1;
          throw refused;
        },
        Date.now,
        Number.POSITIVE_INFINITY,
      ),
      (error) => error === refused,
    );
    const gone = unreachable();
    await assert.rejects(
      untilStoreAnswers(
        async () => {
          calls += 1;
          throw gone;
        },
        () => 2_000,
        1_000,
      ),
      (error) => error === gone,
    );
    assert.equal(calls, 2, 'one try each');
  });

  it("a stop ends a wait at once, without a timer's firing, and raises the store's last error", async () => {
    const stop = new AbortController();
    const gone = unreachable();
    let calls = 0;
    let settled: unknown;
    // The first wait is 100 ms and the next ones longer; the stop comes while the first one runs, and the timers
    // are held still, so only the stop can end it.
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const waiting = untilStoreAnswers(
        async () => {
          calls += 1;
          throw gone;
        },
        Date.now,
        Number.POSITIVE_INFINITY,
        stop.signal,
      ).then(
        () => (settled = 'resolved'),
        (error: unknown) => (settled = error),
      );
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(settled, undefined, 'waiting out the store');
      stop.abort();
      await waiting;
    } finally {
      mock.timers.reset();
    }
    assert.equal(settled, gone);
    assert.equal(calls, 1, 'no try after the stop');
  });
});

describe('inbound backlog', () => {
  it('counts waiting events and the oldest age; warns at most once a minute while it lasts, then says it drained', () => {
    const { logger, lines } = capturingLogger();
    let now = 1_000_000;
    const backlog = new RecordBacklog({ logger, clock: () => now });
    const first = backlog.enter();
    now += 1_000;
    const second = backlog.enter();
    assert.deepEqual(
      { count: backlog.count, oldestAgeMs: backlog.oldestAgeMs },
      { count: 2, oldestAgeMs: 1_000 },
    );
    backlog.check();
    assert.equal(lines.length, 0, 'not a lasting backlog yet');
    now += 5_000;
    backlog.check();
    now += 30_000;
    backlog.check();
    now += 30_000;
    backlog.check();
    const warnings = lines.filter((l) => l.msg === 'inbound events are waiting to be recorded');
    assert.deepEqual(
      warnings.map((l) => ({ count: l.count, oldestAgeMs: l.oldestAgeMs, level: l.level })),
      [
        { count: 2, oldestAgeMs: 6_000, level: 40 },
        { count: 2, oldestAgeMs: 66_000, level: 40 },
      ],
    );
    first();
    first();
    assert.deepEqual(
      { count: backlog.count, oldestAgeMs: backlog.oldestAgeMs },
      { count: 1, oldestAgeMs: 65_000 },
    );
    second();
    assert.deepEqual(
      { count: backlog.count, oldestAgeMs: backlog.oldestAgeMs },
      { count: 0, oldestAgeMs: 0 },
    );
    assert.equal(lines.filter((l) => l.msg === 'the inbound backlog was recorded').length, 1);
  });
});
