/**
 * How parley's live engine reconnects, against the simulator over real sockets (docs/decisions/0025-live-engine.md):
 * a platform that accepts each login and ends it a moment later (a stream restart, 515, or a dropped socket) is not
 * hammered, the backoff going on from one short connection to the next; a 405 on an open connection is reported as
 * down (not connected, calls answered 503) while the engine refreshes the platform version; and a disconnect meanwhile
 * is not undone by the reconnect that refresh was for. Runs on SQLite.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { WAVersion } from 'baileys';
import type { User } from '../../sim/model/accounts.ts';
import type { Connection } from '../../sim/server/connection.ts';
import type { Simulator } from '../../sim/simulator.ts';
import {
  companion,
  control,
  liveApp,
  pairLive,
  sessionStatuses,
  startTestSimulator,
  statusesUntilConnected,
  until,
  waitForStatus,
} from './support.ts';

/** How long the simulator keeps each flapping login open after its `<success>`, ms. */
const FLAP_OPEN_MS = 300;

type Attempt = { at: string; kind: string; phone?: string; loggedIn: boolean };

/** The accepted logins of `phone` the simulator saw (its connection log), with when each socket opened, epoch ms. */
async function loginsOf(sim: Simulator, phone: string): Promise<number[]> {
  const { body } = await control(sim, 'GET', '/connections');
  return (body.attempts as Attempt[])
    .filter((a) => a.phone === phone && a.kind === 'login' && a.loggedIn)
    .map((a) => Date.parse(a.at));
}

describe('live engine reconnects (simulator)', () => {
  let sim: Simulator;
  let phone = 5511950000000;
  const nextAccount = async () => {
    phone += 1;
    const account = String(phone);
    assert.equal((await control(sim, 'POST', '/users', { phone: account })).status, 201);
    return account;
  };
  before(async () => {
    sim = await startTestSimulator();
  });
  after(async () => {
    await sim.close();
  });

  // The first reconnect after the fault is the first since the link opened (the pairing's restart counts no step):
  // at once for a restart (515), 1 s for a drop; then 2 s, 4 s.
  const flaps = [
    {
      kind: 'a stream restart (515)',
      fault: { kind: 'stream-error', code: 515 },
      first: 'restart required (515); reconnecting',
      firstMs: 0,
    },
    {
      kind: 'a dropped socket',
      fault: { kind: 'drop' },
      first: 'connection closed (428); reconnecting in 1 s',
      firstMs: 1_000,
    },
  ] as const;
  for (const { kind, fault, first: firstReason, firstMs } of flaps) {
    it(`a platform that ends each login a moment after it opened (${kind}): the logins back off`, async () => {
      // The jitter source answers 0.5: the delays are exactly 1 s doubled per attempt.
      const app = await liveApp(sim, { tuning: { random: () => 0.5 } });
      const account = await nextAccount();
      // The platform's side of the flapping: each login of the account ends FLAP_OPEN_MS after its <success>.
      const flap = ({ user, connection }: { user: User; connection: Connection }) => {
        if (user.phone !== account) return;
        setTimeout(() => {
          if (fault.kind === 'drop') connection.drop();
          else connection.streamError(fault.code);
        }, FLAP_OPEN_MS);
      };
      try {
        await pairLive(sim, app, account, ['SessionStatus']);
        const paired = await statusesUntilConnected(app);
        const before = (await loginsOf(sim, account)).length;
        sim.context.events.on('login', flap);
        const faultAt = Date.now();
        assert.equal((await control(sim, 'POST', '/faults', { phone: account, ...fault })).status, 200);
        // Three logins after the fault, each ended FLAP_OPEN_MS after it opened. Reconnecting at once (or after 1 s)
        // at every open made them 0.3 s (1.3 s) apart: 47 (11) logins in 15 s.
        const logins = await until('three logins after the fault', async () => {
          const all = (await loginsOf(sim, account)).slice(before);
          return all.length >= 3 ? all : undefined;
        });
        const [first = 0, second = 0, third = 0] = logins;
        assert.ok(
          first - faultAt >= firstMs - 100,
          `the first login came ${first - faultAt} ms after the fault`,
        );
        // The short opens between them start nothing over: each login waits twice as long as the one before.
        const gap = (ms: number, seconds: number) => ms >= FLAP_OPEN_MS + seconds * 1_000 - 100;
        assert.ok(gap(second - first, 2), `the second login came ${second - first} ms after the first`);
        assert.ok(gap(third - second, 4), `the third login came ${third - second} ms after the second`);
        // One status per change, at the backoff's pace.
        const statuses = await until('the third login reported', async () => {
          const all = (await sessionStatuses(app)).slice(paired);
          return all.length >= 6 ? all : undefined;
        });
        assert.deepEqual(
          statuses.slice(0, 6).map((s) => s.status),
          ['disconnected', 'connected', 'disconnected', 'connected', 'disconnected', 'connected'],
        );
        assert.equal(statuses[0]?.reason, firstReason);
        const again = firstReason.replace(/ in 1 s$/, '');
        assert.equal(statuses[2]?.reason, `${again} in 2 s`);
        assert.equal(statuses[4]?.reason, `${again} in 4 s`);
      } finally {
        sim.context.events.off('login', flap);
        await app.t.close();
      }
    });
  }

  it('a 405 on an open connection: reported down while the version is refreshed, and calls told to retry', async () => {
    let fetches = 0;
    let answer: (error: Error) => void = () => undefined;
    const fetchVersion = () => {
      fetches += 1;
      // The refresh (up to 5 s against the platform's site) answers when the test says: the version is kept.
      return new Promise<WAVersion>((_resolve, reject) => {
        answer = reject;
      });
    };
    const app = await liveApp(sim, { tuning: { fetchVersion } });
    try {
      const account = await nextAccount();
      await pairLive(sim, app, account);
      const outdated = await control(sim, 'POST', '/faults', {
        phone: account,
        kind: 'stream-error',
        code: 405,
      });
      assert.equal(outdated.status, 200);
      await until('the version refresh', () => (fetches > 0 ? true : undefined));
      // The socket is closed: the session is not connected, and comes back by itself (503, not a 409).
      const status = await app.status();
      assert.deepEqual(
        { connected: status.connected, loggedIn: status.loggedIn, reason: status.reason },
        {
          connected: false,
          loggedIn: true,
          reason: 'client version outdated (405): refreshing the platform version and retrying',
        },
      );
      const call = await app.live('GET', '/v1/contacts/list');
      assert.equal(call.status, 503, JSON.stringify(call.body));
      answer(new TypeError('fetch failed'));
      await waitForStatus(app, true, true);
    } finally {
      await app.t.close();
    }
  });

  it('a disconnect while the platform version is refreshed after a 405 stays disconnected: no socket, no lock', async () => {
    let fetches = 0;
    let answer: (error: Error) => void = () => undefined;
    const fetchVersion = () => {
      fetches += 1;
      // The refresh (up to 5 s against the platform's site) fails when the test says: the current version is kept.
      return new Promise<WAVersion>((_resolve, reject) => {
        answer = reject;
      });
    };
    const app = await liveApp(sim, { tuning: { fetchVersion } });
    try {
      const account = await nextAccount();
      await pairLive(sim, app, account);
      const before = (await loginsOf(sim, account)).length;
      const outdated = await control(sim, 'POST', '/faults', {
        phone: account,
        kind: 'stream-error',
        code: 405,
      });
      assert.equal(outdated.status, 200);
      await until('the version refresh', () => (fetches > 0 ? true : undefined));
      const disconnect = await app.live('POST', '/v1/session/disconnect');
      assert.equal(disconnect.status, 200, JSON.stringify(disconnect.body));
      answer(new TypeError('fetch failed'));
      const deadline = Date.now() + 3_000;
      // The reconnect the refresh was for came at once after it (no delay follows a refresh): none may come now.
      const relogin = await until('a login after the disconnect, or 3 s without one', async () =>
        (await loginsOf(sim, account)).length > before ? true : Date.now() > deadline ? false : undefined,
      );
      assert.equal(relogin, false, 'a socket logged in after the disconnect');
      const status = await app.status();
      assert.deepEqual([status.connected, status.loggedIn], [false, true]);
      assert.equal((await companion(sim, account)).sockets, 0, 'no socket open at the platform');
      const locks = await app.t.services.store.db
        .selectFrom('instance_locks')
        .select('owner')
        .where('instance_id', '=', app.instanceId)
        .execute();
      assert.deepEqual(locks, [], 'no lock held');
      // A connect logs in again, without a scan.
      assert.equal((await app.live('POST', '/v1/session/connect')).status, 200);
      await waitForStatus(app, true, true);
    } finally {
      await app.t.close();
    }
  });
});
