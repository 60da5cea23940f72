import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import type { SentMessage } from '../../src/domain/messages.ts';
import type { WaitSignal } from '../../src/domain/withdrawal.ts';
import { storedOutcome } from '../../src/sends/outcomes.ts';
import { messageReport } from '../../src/sends/queue-deps.ts';
import { SendWaiters } from '../../src/sends/waiters.ts';
import type { SendJob } from '../../src/store/send-jobs.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');

/** A job of instance `i1` stored by a first forward, as a read returned it. */
function job(status: SendJob['status'], sentAt: number | null = null): SendJob {
  return {
    instanceId: 'i1',
    id: '3EB0FORWARDED000000000A',
    seq: 1,
    chat: '5511977776666@s.whatsapp.net',
    kind: 'text',
    payload: '',
    mode: 'sync',
    status,
    runAt: T0,
    notBefore: 0,
    sendAt: null,
    attempts: 1,
    maxAttempts: 1,
    lastError: null,
    lockedBy: status === 'sending' ? 'this-node' : null,
    createdAt: T0,
    updatedAt: T0,
    sentAt,
    loggedOutAt: null,
  };
}

describe('the answer for a job stored by an earlier forward (src/sends/outcomes.ts)', () => {
  it('a relay that ended between the read and the wait is answered from the store, and only that wait is withdrawn', async () => {
    const waiters = new SendWaiters();
    const wait = (waited: SendJob, signal: WaitSignal) => waiters.await(waited, signal);
    // The first forward's own request still waits (its relay has not answered it yet).
    const first = waiters.await(job('sending'));
    // Read `sending`; by the time this wait is registered the relay has ended and its outcome is stored.
    const sent = await storedOutcome(job('sending'), wait, async () => job('sent', T0 + 5));
    assert.deepEqual(sent, { id: '3EB0FORWARDED000000000A', timestamp: T0 + 5 });
    assert.equal(waiters.has(job('sending')), true, "the first request's wait is kept");
    const relayed: SentMessage = { id: '3EB0FORWARDED000000000A', timestamp: T0 + 5 };
    waiters.settle(job('sending'), relayed);
    assert.deepEqual(await first, relayed);
    assert.equal(waiters.has(job('sending')), false);

    await assert.rejects(
      storedOutcome(job('pending'), wait, async () => job('failed')),
      (error: unknown) => error instanceof DomainError && error.message === 'message already failed',
    );
    await assert.rejects(
      storedOutcome(job('sending'), wait, async () => job('canceled')),
      (error: unknown) => error instanceof DomainError && error.message === 'message already canceled',
    );
    assert.equal(waiters.has(job('sending')), false, 'withdrawn waits leave nothing behind');
  });

  it('a job still pending or sending, or a read that fails, keeps the wait until the relay settles it', async () => {
    const waiters = new SendWaiters();
    const wait = (waited: SendJob, signal: WaitSignal) => waiters.await(waited, signal);
    const relayed: SentMessage = { id: '3EB0FORWARDED000000000A', timestamp: T0 + 9 };
    const stillSending = storedOutcome(job('sending'), wait, async () => job('sending'));
    const readFailed = storedOutcome(job('pending'), wait, async () => {
      throw new Error('the store is unavailable right now; retry shortly');
    });
    const refused = new DomainError('platform_refused', 'the platform rejected the message (error 479)');
    // Both waits registered once their reads answered.
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(waiters.has(job('sending')), true);
    waiters.settle(job('sending'), relayed);
    assert.deepEqual(await stillSending, relayed);
    assert.deepEqual(await readFailed, relayed);
    const failing = storedOutcome(job('sending'), wait, async () => job('sending'));
    await new Promise((resolve) => setImmediate(resolve));
    waiters.settle(job('sending'), undefined, refused);
    await assert.rejects(failing, refused);
  });

  it('answers a job read sent, failed or canceled at once, without waiting', async () => {
    const never = () => new Promise<SentMessage>(() => undefined);
    const reread = async () => assert.fail('no second read');
    assert.deepEqual(await storedOutcome(job('sent', T0 + 1), never, reread), {
      id: '3EB0FORWARDED000000000A',
      timestamp: T0 + 1,
    });
    await assert.rejects(storedOutcome(job('failed'), never, reread), /message already failed/);
  });
});

describe('outcomes owed to waiting requests (src/sends/waiters.ts)', () => {
  const key = { instanceId: 'i1', id: '3EB0OWED00000000000001' };
  const relayed: SentMessage = { id: key.id, timestamp: T0 + 7 };

  it('an outcome carried by a waiting request is answered, not handed back', async () => {
    const waiters = new SendWaiters();
    const answer = waiters.await(key);
    assert.equal(waiters.carry(key, T0 + 7), true, 'a request waits: its answer carries the outcome');
    assert.equal(waiters.settle(key, relayed), undefined);
    assert.deepEqual(await answer, relayed);
  });

  it('no request waiting: nothing is carried, and the outcome is not handed back (its event was recorded)', () => {
    const waiters = new SendWaiters();
    assert.equal(waiters.carry(key, T0 + 7), false);
    assert.equal(waiters.settle(key, relayed), undefined);
  });

  it('every request gone before the outcome reached it (client away, or answered 504 unknown): handed back with its time', async () => {
    const waiters = new SendWaiters();
    const client = new AbortController();
    const gone = waiters.await(key, client.signal);
    assert.equal(waiters.carry(key, T0 + 7), true);
    client.abort(new Error('client gone'));
    await assert.rejects(gone, /client gone/);
    assert.deepEqual(
      waiters.settle(key, relayed),
      { kind: 'message', id: key.id, status: 'sent', at: T0 + 7 },
      'the relay records it as an event',
    );
    assert.equal(waiters.settle(key, relayed), undefined, 'once');

    const followed = waiters.await(key);
    assert.equal(waiters.carry(key, T0 + 8), true);
    waiters.giveUp(key, new DomainError('timeout', 'outcome unknown'));
    await assert.rejects(followed, /outcome unknown/);
    assert.equal(waiters.has(key), false);
    assert.deepEqual(
      waiters.settle(key, relayed),
      { kind: 'message', id: key.id, status: 'sent', at: T0 + 8 },
      'a 504 with the outcome unknown keeps it owed',
    );
  });

  it('a failure left out for a request that left before it was answered: handed back, once', async () => {
    const waiters = new SendWaiters();
    const client = new AbortController();
    const gone = waiters.await(key, client.signal);
    const failed = messageReport(key.id, 'failed', T0 + 5, 'refused by the platform');
    assert.equal(waiters.carryOutcome(key, failed), true, 'the failure transaction leaves its event out');
    client.abort(new Error('client gone'));
    await assert.rejects(gone, /client gone/);
    const refused = new DomainError('platform_refused', 'refused by the platform');
    assert.deepEqual(
      waiters.settle(key, undefined, refused),
      failed,
      'the relay records the failure as an event',
    );
    assert.equal(waiters.settle(key, undefined, refused), undefined, 'once');
  });

  it('a failure carried by a waiting request is answered, not handed back', async () => {
    const waiters = new SendWaiters();
    const answer = waiters.await(key);
    assert.equal(waiters.carryOutcome(key, messageReport(key.id, 'failed', T0 + 5, 'refused')), true);
    const refused = new DomainError('platform_refused', 'refused');
    assert.equal(waiters.settle(key, undefined, refused), undefined);
    await assert.rejects(answer, /refused/);
  });

  it('an outcome of the other kind than the one noted is never handed back (a rolled-back note)', async () => {
    const waiters = new SendWaiters();
    const client = new AbortController();
    const gone = waiters.await(key, client.signal);
    assert.equal(
      waiters.carry(key, T0 + 7),
      true,
      'a transaction marking it sent left the event out, then rolled back',
    );
    client.abort(new Error('client gone'));
    await assert.rejects(gone, /client gone/);
    assert.equal(
      waiters.settle(key, undefined, new Error('relay failed')),
      undefined,
      'no sent event for a failure',
    );
    assert.equal(waiters.settle(key, relayed), undefined, 'and the note is gone');
  });

  it('a recording rolled back after noting the outcome, then committed with the event once its request left: owed nothing', async () => {
    const waiters = new SendWaiters();
    const client = new AbortController();
    const gone = waiters.await(key, client.signal);
    assert.equal(
      waiters.carry(key, T0 + 7),
      true,
      'the first transaction left the event out, then rolled back',
    );
    client.abort(new Error('client gone'));
    await assert.rejects(gone, /client gone/);
    assert.equal(
      waiters.carry(key, T0 + 9),
      false,
      'the retry finds no request: it records the event itself',
    );
    assert.equal(waiters.settle(key, relayed), undefined, 'so the relay records no second one');
  });

  it("an answer read from the store on the relay's behalf carries the outcome, or leaves it owed to that relay", async () => {
    const waiters = new SendWaiters();
    const followed = waiters.await(key);
    waiters.carry(key, T0 + 7);
    waiters.answer(key, relayed);
    assert.deepEqual(await followed, relayed);
    assert.equal(waiters.settle(key, relayed), undefined, 'carried by the answer');

    const client = new AbortController();
    const gone = waiters.await(key, client.signal);
    waiters.carry(key, T0 + 8);
    client.abort(new Error('client gone'));
    await assert.rejects(gone, /client gone/);
    waiters.answer(key, relayed);
    assert.deepEqual(
      waiters.settle(key, relayed),
      { kind: 'message', id: key.id, status: 'sent', at: T0 + 8 },
      'no request was left to answer: the relay records it',
    );
  });

  it('a failure settles what a rolled-back recording noted: a later relay owes nothing', () => {
    const waiters = new SendWaiters();
    waiters.await(key).catch(() => undefined);
    waiters.carry(key, T0 + 7);
    assert.equal(waiters.settle(key, undefined, new Error('refused')), undefined, 'answered by the failure');
    assert.equal(waiters.settle(key, relayed), undefined);
    const client = new AbortController();
    waiters.await(key, client.signal).catch(() => undefined);
    waiters.carry(key, T0 + 9);
    client.abort();
    assert.equal(
      waiters.settle(key, undefined, new Error('refused')),
      undefined,
      'a failure hands back no sent event',
    );
    assert.equal(waiters.settle(key, relayed), undefined, 'and clears the note');
  });
});
