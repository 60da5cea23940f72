import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { readPairedCreds } from '../../src/engines/baileys/auth-state.ts';
import { STABLE_OPEN_MS } from '../../src/engines/baileys/close-policy.ts';
import { fakeSessionsPerSuite, isDomainError } from './fake-sessions.ts';
import { ME, pairedCreds } from './fake-socket.ts';
import { until } from './support.ts';

const PEER = '5511988887777@s.whatsapp.net';

/**
 * A live (Baileys) session's lifecycle over fake sockets (docs/decisions/0016-session-lifecycle.md): linking by QR
 * and its rotation, the 515 restart, the end of a pairing attempt, a connect the platform never answers, the
 * errors sends get while reconnecting, disconnected or logged out, and no listener left on a socket it is done
 * with. What a session configures, sends, reads and records: session.test.ts.
 */
describe('live session over a fake socket: its lifecycle', () => {
  const setup = fakeSessionsPerSuite();

  const ofType = <T extends EngineEvent['type']>(events: EngineEvent[], type: T) =>
    events.filter((e): e is Extract<EngineEvent, { type: T }> => e.type === type);

  it('links by QR (docs/decisions/0016-session-lifecycle.md): rotation 60 s then 20 s, the 515 restart after pairing is a new socket at once', async (t: TestContext) => {
    const { session, fake, rc, sock } = await setup({
      paired: false,
      open: (s, i) => (i === 0 ? s.qr('2@ref1,noise,identity,adv') : s.open()),
    });
    await session.connect();
    assert.deepEqual(
      { connected: session.state().connected, loggedIn: session.state().loggedIn },
      { connected: true, loggedIn: false },
    );
    const now = Date.parse('2030-01-01T00:00:00Z');
    assert.deepEqual(session.pairingCode(), { code: '2@ref1,noise,identity,adv', expiresAt: now + 60_000 });
    sock().qr('2@ref2,noise,identity,adv');
    assert.deepEqual(session.pairingCode(), { code: '2@ref2,noise,identity,adv', expiresAt: now + 20_000 });
    assert.equal(await session.requestPairingCode?.('5511999990000'), 'PARL3YOK');
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const paired = pairedCreds();
    sock().emit('creds.update', { me: paired.me, account: paired.account, platform: 'android' });
    sock().emit('connection.update', { isNewLogin: true, qr: undefined });
    // Linked, but the socket that carries messages is not open yet: not connected, so nobody sends into the restart.
    assert.deepEqual(
      { connected: session.state().connected, loggedIn: session.state().loggedIn },
      { connected: false, loggedIn: true },
    );
    sock().close(515, 'Stream Errored (restart required)');
    await until(() => /restart required \(515\)/.test(session.state().reason ?? ''), 2_000, '515');
    assert.equal(session.state().loggedIn, true);
    // No backoff: the timer of the reopen is due at once (a tick of 0 ms runs it).
    assert.equal(session.state().reason, 'restart required (515); reconnecting');
    t.mock.timers.tick(0);
    await until(() => session.state().connected && fake.sockets.length === 2, 2_000, 'reopen');
    t.mock.timers.reset();
    assert.equal(session.pairingCode(), null);
    assert.equal(session.state().jid, ME.id);
    assert.equal(session.state().phone, ME.phone);
    assert.equal(await session.waitForLogin(10), true);
    assert.ok(await readPairedCreds(rc.context.auth), 'paired credentials stored');
    const states = ofType(rc.events, 'connection').map((e) => [e.state.connected, e.state.loggedIn]);
    assert.deepEqual(states.at(0), [true, false]);
    assert.deepEqual(states.at(-1), [true, true]);
  });

  it('a 515 that comes again before the connection opened backs off like any other close', async (t: TestContext) => {
    const { session, fake, sock } = await setup({
      paired: false,
      open: (s, i) => (i === 0 ? s.qr('2@ref1,noise,identity,adv') : i === 1 ? undefined : s.open()),
    });
    await session.connect();
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const paired = pairedCreds();
    sock().emit('creds.update', { me: paired.me, account: paired.account, platform: 'android' });
    sock().close(515, 'Stream Errored (restart required)');
    await until(() => /restart required \(515\)/.test(session.state().reason ?? ''), 2_000, '515');
    t.mock.timers.tick(0);
    await until(() => fake.sockets.length === 2, 2_000, 'the restart at once');
    // The new socket is restarted again before it opened: the second reconnect since the open waits 2 s (±20 %,
    // here exactly: the jitter source answers 0.5).
    sock().close(515, 'Stream Errored (restart required)');
    await until(() => /in 2 s$/.test(session.state().reason ?? ''), 2_000, 'backoff');
    t.mock.timers.tick(1_999);
    assert.equal(fake.sockets.length, 2, 'not before the backoff');
    t.mock.timers.tick(1);
    await until(
      () => session.state().connected && fake.sockets.length === 3,
      2_000,
      'reopen after the backoff',
    );
    t.mock.timers.reset();
  });

  it('a connection lost a moment after the link opened reconnects after the first step, 1 s: the pairing counts no step', async (t: TestContext) => {
    const { session, fake, sock } = await setup({
      paired: false,
      open: (s, i) => (i === 0 ? s.qr('2@ref1,noise,identity,adv') : s.open()),
    });
    await session.connect();
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const paired = pairedCreds();
    sock().emit('creds.update', { me: paired.me, account: paired.account, platform: 'android' });
    sock().close(515, 'Stream Errored (restart required)');
    await until(() => /restart required \(515\)/.test(session.state().reason ?? ''), 2_000, '515');
    t.mock.timers.tick(0);
    await until(() => session.state().connected && fake.sockets.length === 2, 2_000, 'linked and open');
    // Well within STABLE_OPEN_MS of the open, the platform goes away (docs/decisions/0025-live-engine.md): the
    // pairing's restart was no failed login, so this is the first step (1 s; the jitter source answers 0.5).
    t.mock.timers.tick(5_000);
    sock().close(428, 'Connection Closed');
    await until(() => !session.state().connected, 2_000, 'the close');
    assert.equal(session.state().reason, 'connection closed (428); reconnecting in 1 s');
    t.mock.timers.tick(999);
    assert.equal(fake.sockets.length, 2, 'not before the backoff');
    t.mock.timers.tick(1);
    await until(() => session.state().connected && fake.sockets.length === 3, 2_000, 'reopened');
    t.mock.timers.reset();
  });

  it('restarts (515) right after each open back off: at once, 2 s, 4 s, and at once again after a stable open', async (t: TestContext) => {
    const { session, fake, rc, sock } = await setup();
    await session.connect();
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const reason = () => session.state().reason ?? '';
    const restart = () => sock().close(515, 'Stream Errored (restart required)');
    // The first restart since the connect: a new socket at once (as after pairing).
    restart();
    await until(() => reason() === 'restart required (515); reconnecting', 2_000, 'first restart');
    t.mock.timers.tick(0);
    await until(() => session.state().connected && fake.sockets.length === 2, 2_000, 'reopened at once');
    // Restarted again as soon as it opened (docs/decisions/0025-live-engine.md): the backoff goes on from there
    // instead of starting over at each open (the jitter source answers 0.5: exact delays).
    for (const [seconds, sockets] of [
      [2, 3],
      [4, 4],
    ] as const) {
      restart();
      await until(
        () => reason() === `restart required (515); reconnecting in ${seconds} s`,
        2_000,
        `${seconds} s`,
      );
      t.mock.timers.tick(seconds * 1_000 - 1);
      assert.equal(fake.sockets.length, sockets - 1, 'not before the backoff');
      t.mock.timers.tick(1);
      await until(() => session.state().connected && fake.sockets.length === sockets, 2_000, 'reopened');
    }
    // Open for STABLE_OPEN_MS: the next restart is a first one again.
    t.mock.timers.tick(STABLE_OPEN_MS);
    restart();
    await until(
      () => reason() === 'restart required (515); reconnecting',
      2_000,
      'restart after a stable open',
    );
    t.mock.timers.tick(0);
    await until(
      () => session.state().connected && fake.sockets.length === 5,
      2_000,
      'reopened at once again',
    );
    t.mock.timers.reset();
    // Each open and each close is reported once, at the backoff's pace: the open of the connect, then two per restart.
    assert.equal(ofType(rc.events, 'connection').length, 1 + 2 * 4);
  });

  it('ends the pairing attempt after the last QR (connected:false, connect again)', async () => {
    const { session, rc, sock } = await setup({ paired: false, open: (s) => s.qr('2@only') });
    await session.connect();
    sock().close(408, 'QR refs attempts ended');
    await until(() => !session.state().connected, 2_000, 'stop');
    assert.equal(session.pairingCode(), null);
    assert.match(session.state().reason ?? '', /no QR code was scanned/);
    assert.equal((await rc.context.auth.list('creds')).size, 0);
    assert.equal(await session.waitForLogin(5), false);
  });

  it('connect is bounded even when the platform never answers', async () => {
    const { session } = await setup({ open: () => undefined, engine: { connectDeadlineMs: 50 } });
    await assert.rejects(session.connect(), isDomainError('platform_unreachable', /no answer within 0.05 s/));
    assert.equal(session.state().connected, false);
    assert.equal(session.state().loggedIn, true);
  });

  it('reports reconnecting sends as 503 and disconnected ones as 409; logged-out ones as not logged in', async () => {
    const { session, sock } = await setup();
    await assert.rejects(
      session.send({ to: PEER, content: { kind: 'text', text: 'x', linkPreview: false } }),
      isDomainError('not_connected', /instance is not connected/),
    );
    await session.connect();
    sock().close(428);
    await until(() => /reconnecting/.test(session.state().reason ?? ''), 2_000, 'reconnecting');
    await assert.rejects(
      session.send({ to: PEER, content: { kind: 'text', text: 'x', linkPreview: false } }),
      isDomainError('platform_unreachable', /reconnecting/),
    );
    await session.logout();
    await assert.rejects(session.listGroups(), isDomainError('not_logged_in', /instance is not logged in/));
  });

  it('leaves no listener on a socket it is done with', async () => {
    const { session, sock } = await setup();
    await session.connect();
    const socket = sock();
    assert.ok(socket.events.listenerCount('messages.upsert') > 0);
    await session.disconnect();
    for (const name of socket.events.eventNames())
      assert.equal(socket.events.listenerCount(name), 0, String(name));
    for (const name of socket.frames.eventNames())
      assert.equal(socket.frames.listenerCount(name), 0, String(name));
    await session.close();
  });
});
