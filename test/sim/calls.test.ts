import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Simulator } from '../../sim/simulator.ts';
import { control, endClient, pairClient, startTrustedSimulator, until, waitForEvent } from './support.ts';

const ACCOUNT = '5511900000041';
const CALLER = '5511900000042';

describe('simulator calls: a user calls an account; the account rejects (real Baileys client)', () => {
  let sim: Simulator;
  before(async () => {
    sim = await startTrustedSimulator();
    await control(sim, 'POST', '/users', { phone: ACCOUNT });
    await control(sim, 'POST', '/users', { phone: CALLER, pushName: 'Caio' });
  });
  after(async () => {
    await sim.close();
  });

  it('validates the caller, the account and the call id', async () => {
    const call = (body: unknown, phone = CALLER) => control(sim, 'POST', `/users/${phone}/call`, body);
    assert.equal((await call({ to: ACCOUNT }, '5511900000049')).status, 404);
    assert.deepEqual(await call({ to: CALLER }), {
      status: 400,
      body: { error: { code: 400, message: 'to: must differ from the caller' } },
    });
    assert.deepEqual(await call({ to: ACCOUNT }), {
      status: 409,
      body: { error: { code: 409, message: `to: account ${ACCOUNT} has no open socket` } },
    });
    const terminate = await control(sim, 'POST', `/users/${CALLER}/calls/${'A'.repeat(32)}/terminate`);
    assert.deepEqual(terminate, {
      status: 404,
      body: { error: { code: 404, message: 'id: no such call of this user' } },
    });
  });

  it('an offer and a terminate reach Baileys as call events; rejectCall is acked and recorded', async () => {
    const client = await pairClient(sim, ACCOUNT);
    const offered = waitForEvent(
      client,
      'call',
      (calls) => calls.some((c) => c.status === 'offer'),
      'an offer',
    );
    const made = await control(sim, 'POST', `/users/${CALLER}/call`, { to: ACCOUNT, video: true });
    assert.equal(made.status, 201);
    const call = made.body as { id: string; status: string; sockets: number };
    assert.match(call.id, /^[0-9A-F]{32}$/);
    assert.equal(call.status, 'ringing');
    assert.equal(call.sockets, 1);
    const [offer] = await offered;
    assert.equal(offer?.id, call.id);
    assert.equal(offer?.from, `${CALLER}@s.whatsapp.net`);
    assert.equal(offer?.isVideo, true);

    await client.sock.rejectCall(call.id, `${CALLER}@s.whatsapp.net`);
    const calls = await control(sim, 'GET', `/users/${CALLER}/calls`);
    const listed = (calls.body as { id: string; status: string; rejectedByDevice?: number }[])[0];
    assert.equal(listed?.status, 'rejected');
    assert.equal(listed?.rejectedByDevice, 1);
    const entry = await until('the call-reject entry', () =>
      sim.context.accounts.get(CALLER)?.inbox.find((e) => e.type === 'call-reject'),
    );
    assert.deepEqual(
      { id: entry.id, from: entry.from, fromDevice: entry.fromDevice },
      { id: call.id, from: ACCOUNT, fromDevice: 1 },
    );

    const second = (await control(sim, 'POST', `/users/${CALLER}/call`, { to: ACCOUNT })).body as {
      id: string;
    };
    const ended = waitForEvent(
      client,
      'call',
      (c) => c.some((x) => x.id === second.id && x.status === 'terminate'),
      'a terminate',
    );
    const terminated = await control(sim, 'POST', `/users/${CALLER}/calls/${second.id}/terminate`);
    assert.equal((terminated.body as { status: string }).status, 'terminated');
    const [end] = await ended;
    assert.equal(end?.isVideo, false, 'the offer told a voice call');
    await endClient(client);
  });
});
