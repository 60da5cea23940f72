/**
 * The credential store's retry (src/sessions/auth-retry.ts, docs/decisions/0011-store-faults.md): an engine reads here
 * what an incoming event needs after the platform was told of it (a poll's secret to decrypt a vote), so a read is
 * tried as a recording is: the store unreachable without limit, an unknown error `unknownAttempts` times in all, a
 * permanent error once. Before, an unknown error left the store at once, and the live engine dropped the vote.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AuthStateStore } from '../../src/engines/engine.ts';
import { RetryingAuthStateStore } from '../../src/sessions/auth-retry.ts';
import { silentLogger } from '../baileys/support.ts';

/** A store whose operations fail with the next of `errors` while any is left, then answer. */
function failingStore(errors: Error[]): { store: AuthStateStore; tries: () => number } {
  let tries = 0;
  const next = async <T>(value: T): Promise<T> => {
    tries += 1;
    const error = errors.shift();
    if (error !== undefined) throw error;
    return value;
  };
  const store: AuthStateStore = {
    get: () => next(new Map([['poll-1', '{"secret":""}']])),
    set: () => next(undefined),
    list: () => next(new Map()),
    clear: () => next(undefined),
  };
  return { store, tries: () => tries };
}

const POLICY = { baseDelayMs: 1, maxDelayMs: 2, unknownAttempts: 5, random: () => 0.5 };

/** `count` errors that are neither transient nor permanent (no code a store classification knows). */
function unknownErrors(count: number): Error[] {
  return Array.from({ length: count }, (_, i) => new Error(`the store answered something unforeseen (${i})`));
}

describe('the credential store’s retry: reads meet an unknown error', () => {
  const wrap = (inner: AuthStateStore) =>
    new RetryingAuthStateStore(inner, POLICY, silentLogger(), new AbortController().signal);

  it('a read failing four times with an unknown error answers at its fifth try', async () => {
    const { store, tries } = failingStore(unknownErrors(4));
    const values = await wrap(store).get('poll-secrets', ['poll-1']);
    assert.equal(values.get('poll-1'), '{"secret":""}');
    assert.equal(tries(), 5);
  });

  it('a list read is tried alike', async () => {
    const { store, tries } = failingStore(unknownErrors(2));
    assert.deepEqual(await wrap(store).list('contacts'), new Map());
    assert.equal(tries(), 3);
  });

  it('a read failing five times is raised after its fifth try', async () => {
    const { store, tries } = failingStore(unknownErrors(5));
    await assert.rejects(wrap(store).get('poll-secrets', ['poll-1']), /unforeseen \(4\)/);
    assert.equal(tries(), 5);
  });

  it('a permanent error is raised at once', async () => {
    const { store, tries } = failingStore([new TypeError('not a function')]);
    await assert.rejects(wrap(store).get('poll-secrets', ['poll-1']), TypeError);
    assert.equal(tries(), 1);
  });

  it('a write’s unknown error is raised at once (as before)', async () => {
    const { store, tries } = failingStore(unknownErrors(1));
    await assert.rejects(wrap(store).set([{ category: 'c', id: 'i', value: 'v' }]), /unforeseen/);
    assert.equal(tries(), 1);
  });

  it('at shutdown an unknown error is raised at once', async () => {
    const stop = new AbortController();
    stop.abort();
    const { store, tries } = failingStore(unknownErrors(1));
    const retrying = new RetryingAuthStateStore(store, POLICY, silentLogger(), stop.signal);
    await assert.rejects(retrying.get('poll-secrets', ['poll-1']), /unforeseen/);
    assert.equal(tries(), 1);
  });
});
