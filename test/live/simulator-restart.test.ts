/**
 * The platform restarts under connected live sessions (docs/decisions/0025-live-engine.md): a simulator with a state
 * directory is closed and started again on the same port, and every parley session comes back by itself, without a
 * scan, its reconnects spread by the backoff's jitter (the simulator's connection log shows when each attempt came),
 * within the wait the backoff's schedule allows; a session linked a moment before the restart reconnects after the
 * backoff's first step, its pairing having counted none. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is
 * set.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import pino from 'pino';
import { type Simulator, startSimulator } from '../../sim/simulator.ts';
import { BACKOFF_MAX_MS, BACKOFF_MIN_MS } from '../../src/engines/baileys/close-policy.ts';
import type { ApiResponse } from '../support/app.ts';
import { testDialects } from '../support/store.ts';
import { control, type LiveApp, liveApp, sessionStatuses, statusesUntilConnected, until } from './support.ts';

/** Sessions restarted at once (the benchmark's live-reconnect row runs 200). */
const SESSIONS = 10;

/**
 * Baileys' connect timeout (its default `connectTimeoutMs`, which parley keeps), ms: how long a socket may take to
 * open, and then the platform to answer its handshake, before the attempt fails and the session waits its next step.
 */
const CONNECT_TIMEOUT_MS = 20_000;

/** How long Baileys waits for the answer to one query, ms (`defaultQueryTimeoutMs` in session-options.ts). */
const QUERY_TIMEOUT_MS = 20_000;

/**
 * The longest a login takes, ms: its socket's opening and the handshake's answer ({@link CONNECT_TIMEOUT_MS} each),
 * then the three queries Baileys makes after the platform's `<success>` before it reports the connection open (the
 * pre-key count, `active`, the key bundle's digest), each answered or given up within {@link QUERY_TIMEOUT_MS}. A
 * machine starved of CPU can take that long.
 */
const LOGIN_WAIT_MS = 2 * CONNECT_TIMEOUT_MS + 3 * QUERY_TIMEOUT_MS;

/** The backoff's jitter, a fraction of the delay either way (docs/decisions/0025-live-engine.md: ±20 %). */
const JITTER = 0.2;

/** What the tests read of `GET /v1/session/status`'s data. */
type SessionStatusView = { connected: boolean; loggedIn: boolean; jid: string | null; reason?: string };

type Attempt = { at: string; kind: string; phone?: string; loggedIn: boolean };

function startSim(stateDir: string, port?: number): Promise<Simulator> {
  return startSimulator({
    stateDir,
    ...(port === undefined ? {} : { port }),
    log: pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
  });
}

/**
 * The longest a session can still wait for its next reconnect once the platform is back, ms, by the backoff
 * docs/decisions/0025-live-engine.md states (1 s doubled per attempt, at most 60 s, ±20 %), when its series began at
 * the first step at most `downMs` ms before the platform came back: the delay of the furthest attempt it can have
 * reached by then (every earlier delay at its shortest), at its longest.
 */
function longestBackoffWaitMs(downMs: number): number {
  let elapsed = 0;
  for (let attempt = 0; ; attempt++) {
    const base = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** attempt);
    const shortest = Math.max(BACKOFF_MIN_MS, base * (1 - JITTER));
    // This attempt's timer cannot have run before the platform was back: it is the one still pending.
    if (elapsed + shortest > downMs) return Math.min(BACKOFF_MAX_MS, base * (1 + JITTER));
    elapsed += shortest;
  }
}

/**
 * How long after the platform came back a session whose series of reconnects began at the first step at most
 * `downMs` ms before must be logged in again, ms: the longest wait still pending ({@link longestBackoffWaitMs}); one
 * attempt whose socket never opens (begun while the platform was still away, or starved of CPU: it fails after
 * {@link CONNECT_TIMEOUT_MS}) and the next step after it, at most twice as long; then a login
 * ({@link LOGIN_WAIT_MS}).
 */
function backWithinMs(downMs: number): number {
  const pending = longestBackoffWaitMs(downMs);
  return pending + CONNECT_TIMEOUT_MS + Math.min(BACKOFF_MAX_MS, 2 * pending) + LOGIN_WAIT_MS;
}

/**
 * Calls `request` until it answers something other than a 503 (the store busy past its wait, or the platform not
 * answering a connect within its deadline: both last on a loaded machine, docs/decisions/0011-store-faults.md), up
 * to {@link until}'s safety net; fails the test with the body of any answer but a 200.
 */
async function settled(what: string, request: () => Promise<ApiResponse>): Promise<ApiResponse> {
  const answer = await until(`${what} answered`, async () => {
    const got = await request();
    return got.status === 503 ? undefined : got;
  });
  assert.equal(answer.status, 200, `${what}: ${JSON.stringify(answer.body)}`);
  return answer;
}

for (const dialect of testDialects()) {
  describe(`simulator restarted under ${SESSIONS} live sessions (${dialect})`, () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'parley-sim-restart-'));
    let sim: Simulator | undefined;
    let app: LiveApp | undefined;
    after(async () => {
      await app?.t.close();
      await sim?.close();
      rmSync(stateDir, { recursive: true, force: true });
    });

    it('every session logs in again by itself, without a scan, the attempts spread over time', async () => {
      sim = await startSim(stateDir);
      app = await liveApp(sim, { dialect });
      const t = app.t;
      const key = app.liveKey;
      const call = (method: 'GET' | 'POST', url: string, id: string) =>
        t.call(method, `${url}?from=${id}`, undefined, { authorization: `Bearer ${key}` });
      const instances = [app.instanceId];
      for (let i = 1; i < SESSIONS; i++) instances.push((await t.newInstance('live', `sim-${i}`)).id);
      const phones = instances.map((_, i) => String(5511950000000 + i));
      /**
       * The session's status, or undefined while the store cannot answer in time (503 `store_unavailable`,
       * docs/decisions/0011-store-faults.md: ten pairings at once can hold a small pool past its wait on a slow
       * machine); any other answer fails the test with its body.
       */
      const status = async (id: string): Promise<SessionStatusView | undefined> => {
        const answer = await call('GET', '/v1/session/status', id);
        if (answer.status === 503) return undefined;
        assert.equal(answer.status, 200, JSON.stringify(answer.body));
        return answer.body.data;
      };
      /** The statuses last read, named in a failure. */
      let last: (SessionStatusView | undefined)[] = [];
      const allBack = async () => {
        last = await Promise.all(instances.map(status));
        const back = last.filter((s): s is SessionStatusView => s?.connected === true && s.loggedIn);
        return back.length === last.length ? back : undefined;
      };
      const current = sim;
      await Promise.all(
        instances.map(async (id, i) => {
          const phone = phones[i] ?? '';
          assert.equal((await control(current, 'POST', '/users', { phone })).status, 201);
          await settled('connect', () => call('POST', '/v1/session/connect', id));
          const qr = await settled('the QR code', () => call('GET', '/v1/session/qr', id));
          const scan = await control(current, 'POST', '/scan', { code: qr.body.data.code, phone });
          assert.equal(scan.status, 200, JSON.stringify(scan.body));
        }),
      );
      await until('every session logged in', allBack);

      const port = sim.port;
      // Every session's series of reconnects begins after this instant.
      const downAt = Date.now();
      await sim.close();
      sim = undefined;
      // Every session must first see the platform go: until then its status still reads as logged in, and
      // waiting for "every session back" would pass on the state from before the restart.
      await until('every session disconnected', async () => {
        const states = await Promise.all(instances.map(status));
        return states.every((s) => s !== undefined && !s.connected) ? true : undefined;
      });
      sim = await startSim(stateDir, port);
      const restarted = sim;
      // Every session was linked well within STABLE_OPEN_MS, and none may carry a step from its pairing: each series
      // began at the first step (1 s), so how long each can take is bounded by how long the platform was away.
      const backMs = backWithinMs(Date.now() - downAt);
      const states = await until('every session back', allBack, backMs).catch(async (error: unknown) => {
        // What each session still down last said, and what the platform saw of its account.
        const { body } = await control(restarted, 'GET', '/connections');
        const down = phones.flatMap((phone, i) => {
          const state = last[i];
          if (state?.connected) return [];
          const seen = (body.attempts as Attempt[]).filter((a) => a.phone === phone);
          return [{ phone, reason: state?.reason, attempts: seen }];
        });
        const unnamed = (body.attempts as Attempt[]).filter((a) => a.phone === undefined);
        throw new Error(
          `${(error as Error).message}; down: ${JSON.stringify(down)}; sockets never identified: ${JSON.stringify(unnamed)}`,
        );
      });
      assert.deepEqual(
        states.map((s) => s.jid),
        phones.map((p) => `${p}:1@s.whatsapp.net`),
      );

      const { body } = await control(restarted, 'GET', '/connections');
      const attempts = body.attempts as Attempt[];
      assert.equal(attempts.filter((a) => a.kind === 'registration').length, 0, 'nobody paired again');
      const firstLogin = new Map<string, number>();
      for (const a of attempts) {
        if (a.kind === 'login' && a.phone && !firstLogin.has(a.phone))
          firstLogin.set(a.phone, Date.parse(a.at));
      }
      assert.deepEqual([...firstLogin.keys()].sort(), [...phones].sort(), 'every account came back');
      for (const phone of phones) {
        assert.ok(
          attempts.some((a) => a.phone === phone && a.loggedIn),
          `${phone} logged in`,
        );
      }
      // Backoff with jitter: the first reconnects are spread over a window (1 s ± 20 %), not a burst.
      const times = [...firstLogin.values()];
      const spread = Math.max(...times) - Math.min(...times);
      assert.ok(spread >= 100, `first attempts spread over ${spread} ms: ${JSON.stringify(times)}`);
      assert.ok(
        new Set(times).size >= SESSIONS / 2,
        `at least half the first attempts at distinct milliseconds: ${JSON.stringify(times)}`,
      );
    });
  });

  describe(`a session linked a moment before the platform restarts (${dialect})`, () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'parley-sim-restart-'));
    let sim: Simulator | undefined;
    let app: LiveApp | undefined;
    after(async () => {
      await app?.t.close();
      await sim?.close();
      rmSync(stateDir, { recursive: true, force: true });
    });

    it('reconnects after the backoff’s first step (1 s): the restart that ended its pairing counted no step', async () => {
      sim = await startSim(stateDir);
      // The jitter source answers 0.5: the delays are exactly 1 s doubled per attempt.
      app = await liveApp(sim, { dialect, tuning: { random: () => 0.5 } });
      const linking = app;
      const phone = '5511950000100';
      assert.equal((await control(sim, 'POST', '/users', { phone })).status, 201);
      await settled('connect', () =>
        linking.live('POST', '/v1/session/connect', { subscribe: ['SessionStatus'] }),
      );
      const qr = await settled('the QR code', () => linking.live('GET', '/v1/session/qr'));
      const scan = await control(sim, 'POST', '/scan', { code: qr.body.data.code, phone });
      assert.equal(scan.status, 200, JSON.stringify(scan.body));
      // The link's last status: the socket opened after the restart that follows the scan.
      const linked = await statusesUntilConnected(linking);

      const port = sim.port;
      const downAt = Date.now();
      await sim.close();
      sim = await startSim(stateDir, port);
      const restarted = sim;
      const backMs = backWithinMs(Date.now() - downAt);
      const [lost] = await until('the lost connection reported', async () => {
        const statuses = (await sessionStatuses(linking)).slice(linked);
        return statuses.length > 0 ? statuses : undefined;
      });
      // Before, the restart (515) that follows the link counted as the first step: 2 s here, then 4 s, and so on.
      assert.deepEqual(lost, {
        status: 'disconnected',
        reason: 'connection closed (428); reconnecting in 1 s',
      });
      await until(
        'logged in again',
        async () => {
          // A 503 (the store busy past its wait on a loaded machine) is asked again.
          const now = await linking.live('GET', '/v1/session/status');
          return now.status === 200 && now.body.data.connected && now.body.data.loggedIn ? true : undefined;
        },
        backMs,
      );
      const { body } = await control(restarted, 'GET', '/connections');
      const attempts = body.attempts as Attempt[];
      assert.ok(
        attempts.some((a) => a.phone === phone && a.kind === 'login' && a.loggedIn),
        'logged in at the restarted platform',
      );
      assert.equal(attempts.filter((a) => a.kind === 'registration').length, 0, 'without a scan');
    });
  });
}
