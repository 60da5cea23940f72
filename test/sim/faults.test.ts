/**
 * The simulator's account faults and connection log, seen by a real Baileys client: a nacked message (the server's
 * ack carries `error`), slow acks, a blocked account (stream error, then every login refused with `<failure
 * reason>`), the reach-out timelock query, `GET`/`DELETE /control/connections`, and the validation of `POST
 * /control/faults`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BinaryNode } from 'baileys';
import type { Simulator } from '../../sim/simulator.ts';
import {
  closeCode,
  connectClient,
  control,
  endClient,
  pairClient,
  startTrustedSimulator,
  until,
  waitForUpdate,
} from './support.ts';

type Attempt = { connection: number; at: string; kind: string; phone?: string; loggedIn: boolean };

describe('simulator account faults and connection log', () => {
  let sim: Simulator;
  before(async () => {
    sim = await startTrustedSimulator();
  });
  after(async () => {
    await sim.close();
  });

  it('validates the fields each kind takes', async () => {
    await control(sim, 'POST', '/users', { phone: '5511940000001' });
    const cases: [unknown, string][] = [
      [{ phone: '5511940000001', kind: 'nack' }, 'code: is required for kind "nack"'],
      [
        { phone: '5511940000001', kind: 'block', code: 503, seconds: 5 },
        'seconds: not allowed with kind "block"',
      ],
      [{ phone: '5511940000001', kind: 'reachout-lock' }, 'seconds: is required for kind "reachout-lock"'],
      [{ phone: '5511940000001', kind: 'drop', count: 2 }, 'count: not allowed with kind "drop"'],
      [{ phone: '5511940000001', kind: 'slow-acks' }, 'ms: is required for kind "slow-acks"'],
      [{ phone: '5511940000001', kind: 'drop', ms: 500 }, 'ms: not allowed with kind "drop"'],
    ];
    for (const [body, message] of cases) {
      assert.deepEqual(await control(sim, 'POST', '/faults', body), {
        status: 400,
        body: { error: { code: 400, message } },
      });
    }
    // Account faults need no open socket.
    assert.deepEqual(
      await control(sim, 'POST', '/faults', { phone: '5511940000001', kind: 'nack', code: 479, count: 2 }),
      { status: 200, body: { phone: '5511940000001', kind: 'nack', code: 479, count: 2, sockets: 0 } },
    );
  });

  it('nack: the next message is acked with the error and not relayed; the one after goes through', async () => {
    const account = '5511940000002';
    const friend = '5511940000003';
    await control(sim, 'POST', '/users', { phone: account });
    await control(sim, 'POST', '/users', { phone: friend });
    const client = await pairClient(sim, account);
    await control(sim, 'POST', '/faults', { phone: account, kind: 'nack', code: 479 });
    const acks: BinaryNode[] = [];
    client.sock.ws.on('frame', (node: BinaryNode) => {
      if (node.tag === 'ack') acks.push(node);
    });
    const refused = await client.sock.sendMessage(`${friend}@s.whatsapp.net`, { text: 'refused' });
    const accepted = await client.sock.sendMessage(`${friend}@s.whatsapp.net`, { text: 'accepted' });
    const deadline = Date.now() + 15_000;
    const ids = [refused?.key.id, accepted?.key.id];
    while (
      !sim.context.accounts.get(friend)?.inbox.some((e) => e.text === 'accepted') ||
      !ids.every((id) => acks.some((a) => a.attrs.id === id))
    ) {
      assert.ok(Date.now() < deadline, 'the second text reached the friend, both acks the client');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const byId = new Map(acks.map((a) => [a.attrs.id, a.attrs.error]));
    assert.equal(byId.get(refused?.key.id ?? ''), '479', JSON.stringify(acks.map((a) => a.attrs)));
    assert.equal(byId.get(accepted?.key.id ?? ''), undefined);
    assert.equal(
      sim.context.accounts.get(friend)?.inbox.some((e) => e.text === 'refused'),
      false,
    );
    await endClient(client);
  });

  it('slow-acks: the message is delivered at once, its ack comes `ms` later', async () => {
    const account = '5511940000006';
    const friend = '5511940000007';
    await control(sim, 'POST', '/users', { phone: account });
    await control(sim, 'POST', '/users', { phone: friend });
    const client = await pairClient(sim, account);
    const DELAY_MS = 3_000;
    const slow = await control(sim, 'POST', '/faults', { phone: account, kind: 'slow-acks', ms: DELAY_MS });
    assert.deepEqual(slow.body, { phone: account, kind: 'slow-acks', ms: DELAY_MS, sockets: 1 });
    const acks: BinaryNode[] = [];
    client.sock.ws.on('frame', (node: BinaryNode) => {
      if (node.tag === 'ack') acks.push(node);
    });
    const t0 = Date.now();
    const sent = await client.sock.sendMessage(`${friend}@s.whatsapp.net`, { text: 'slowly acked' });
    const id = sent?.key.id ?? '';
    await until('the text delivered', () =>
      sim.context.accounts.get(friend)?.inbox.some((e) => e.text === 'slowly acked') ? true : undefined,
    );
    assert.equal(
      acks.some((a) => a.attrs.id === id),
      false,
      'delivered before it is acked',
    );
    await until('its ack', () => (acks.some((a) => a.attrs.id === id) ? true : undefined));
    assert.ok(Date.now() - t0 >= DELAY_MS, 'acked no sooner than the delay');
    await endClient(client);
  });

  it('block: the open socket ends with the code, every login is refused with it until unblock', async () => {
    const account = '5511940000004';
    await control(sim, 'POST', '/users', { phone: account });
    const client = await pairClient(sim, account);
    const ended = waitForUpdate(client, (u) => u.connection === 'close', 'the stream error');
    const blocked = await control(sim, 'POST', '/faults', { phone: account, kind: 'block', code: 403 });
    assert.deepEqual(blocked.body, { phone: account, kind: 'block', code: 403, sockets: 1 });
    assert.equal(closeCode(await ended), 403);
    const refused = connectClient(sim, client.auth);
    assert.equal(closeCode(await waitForUpdate(refused, (u) => u.connection === 'close', 'refusal')), 403);
    await control(sim, 'POST', '/faults', { phone: account, kind: 'unblock' });
    const again = connectClient(sim, client.auth);
    await waitForUpdate(again, (u) => u.connection === 'open', 'open after unblock');
    const account1 = (await control(sim, 'GET', `/connections`)).body as { attempts: Attempt[] };
    const mine = account1.attempts.filter((a) => a.phone === account);
    assert.deepEqual(
      mine.map((a) => [a.kind, a.loggedIn]),
      [
        ['login', true],
        ['login', false],
        ['login', true],
      ],
    );
    await endClient(again);
  });

  it('reachout-lock: the timelock query reports it active with its end, then lifted', async () => {
    const account = '5511940000005';
    await control(sim, 'POST', '/users', { phone: account });
    const client = await pairClient(sim, account);
    await control(sim, 'POST', '/faults', { phone: account, kind: 'reachout-lock', seconds: 600 });
    const ends = sim.context.accounts.get(account)?.restrictions?.reachoutUntil ?? 0;
    const active = await client.sock.fetchAccountReachoutTimelock();
    assert.equal(active.isActive, true);
    assert.equal(active.timeEnforcementEnds?.getTime(), Math.ceil(ends / 1000) * 1000);
    await control(sim, 'POST', '/faults', { phone: account, kind: 'reachout-lock', seconds: 0 });
    const lifted = await client.sock.fetchAccountReachoutTimelock();
    assert.deepEqual([lifted.isActive, lifted.timeEnforcementEnds], [false, undefined]);
    await endClient(client);
  });

  it('GET /control/connections lists attempts with times; DELETE clears them', async () => {
    const { body } = await control(sim, 'GET', '/connections');
    const attempts = (body as { attempts: Attempt[] }).attempts;
    assert.ok(attempts.length > 0);
    for (const a of attempts) {
      assert.match(a.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.ok(['login', 'registration', 'unknown'].includes(a.kind));
    }
    assert.ok(attempts.some((a) => a.kind === 'registration'));
    const cleared = await fetch(`${sim.control}/connections`, { method: 'DELETE' });
    assert.equal(cleared.status, 204);
    assert.deepEqual((await control(sim, 'GET', '/connections')).body, { attempts: [] });
  });
});
