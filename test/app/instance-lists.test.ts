import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { InstanceLists } from '../../src/app/instance-lists.ts';
import type { Environment } from '../../src/domain/environment.ts';
import type { Instance, InstanceId } from '../../src/domain/instance.ts';
import type { Database } from '../../src/store/schema.ts';
import { MemorySignals } from '../support/memory-signals.ts';

/** One instance row of organization `orgId`. */
function instance(orgId: string, name: string): Instance {
  return {
    id: `00000000-0000-4000-8000-${name.padStart(12, '0')}` as InstanceId,
    orgId,
    env: 'test',
    name,
    phone: null,
    jid: null,
    pushName: null,
    webhookUrl: null,
    subscribe: ['Message'],
    hmacKeySealed: null,
    desiredState: 'disconnected',
    lastConnectedAt: null,
    createdAt: '2026-11-26T00:00:00.000Z',
  };
}

/**
 * The instance lists of one turn read together (docs/decisions/0049-turn-batched-reads.md): one read per
 * organization and environment, each answering only its own requests, with copies of their own.
 */
describe('instance lists read per turn', () => {
  const noDb = undefined as unknown as Kysely<Database>;

  it('reads each list once per turn; one organization failing or slow touches no other', async () => {
    const reads: string[] = [];
    let failSlowly: (error: Error) => void = () => undefined;
    const lists = new InstanceLists(noDb, (orgId: string, env: Environment) => {
      reads.push(`${orgId}/${env}`);
      if (orgId === 'org-a') return new Promise((_, reject) => (failSlowly = reject));
      return Promise.resolve([instance(orgId, '1'), instance(orgId, '2')]);
    });
    const a1 = lists.list('org-a', 'test');
    const a2 = lists.list('org-a', 'test');
    const b1 = lists.list('org-b', 'test');
    const b2 = lists.list('org-b', 'test');
    const bLive = lists.list('org-b', 'live');
    // org-b's requests are answered while org-a's read is still running.
    const [first, second] = await Promise.all([b1, b2]);
    assert.deepEqual(
      first?.map((row) => row.name),
      ['1', '2'],
    );
    assert.deepEqual(reads, ['org-a/test', 'org-b/test', 'org-b/live'], 'one read per list');
    assert.ok(first && second);
    assert.notEqual(first[0], second[0], 'each request has its own rows');
    first[0]?.subscribe?.push('ReadReceipt');
    assert.deepEqual(second[0]?.subscribe, ['Message'], 'and its own subscription list');
    assert.equal((await bLive).length, 2);
    failSlowly(new Error('org-a read failed'));
    await assert.rejects(a1, /org-a read failed/);
    await assert.rejects(a2, /org-a read failed/);
    // The next turn reads again: nothing is kept.
    await lists.list('org-b', 'test');
    assert.deepEqual(reads, ['org-a/test', 'org-b/test', 'org-b/live', 'org-b/test']);
  });
});

/**
 * Lists kept between turns with the store's signals (docs/decisions/0088-kept-instance-lists.md): a kept list is
 * served without a read until its signal, a gap, the age bound or this process's own change; a read overtaken by a
 * signal is not kept; nothing is kept while the signals do not listen.
 */
describe('instance lists kept between turns', () => {
  const noDb = undefined as unknown as Kysely<Database>;

  /** Lists over a counting reader of two instances a list, kept with `signals` on a clock the test moves. */
  function keptLists(signals: MemorySignals) {
    const reads: string[] = [];
    let now = 0;
    let version = 0;
    let ownWrite: () => void = () => undefined;
    const lists = new InstanceLists(
      noDb,
      (orgId, env) => {
        reads.push(`${orgId}/${env}`);
        version += 1;
        return Promise.resolve([instance(orgId, `${version}`)]);
      },
      {
        signals,
        maxAgeMs: 1_000,
        now: () => now,
        ownWrites: (listener) => {
          ownWrite = listener;
        },
      },
    );
    return {
      lists,
      reads,
      /** Speaks as this process's own committed write of `instances` rows. */
      ownWrite: () => ownWrite(),
      advance: (ms: number) => {
        now += ms;
      },
      names: async (orgId = 'org-a') => (await lists.list(orgId, 'test')).map((row) => row.name),
    };
  }

  it('serves a kept list without a read, each request its own copy, until its age bound', async () => {
    const signals = new MemorySignals();
    const { lists, reads, advance, names } = keptLists(signals);
    assert.equal(lists.keeping, true);
    assert.deepEqual(await names(), ['1']);
    const [first, second] = await Promise.all([lists.list('org-a', 'test'), lists.list('org-a', 'test')]);
    assert.deepEqual(reads, ['org-a/test'], 'the next turns read nothing');
    assert.ok(first?.[0] && second?.[0]);
    assert.notEqual(first[0], second[0]);
    first[0].name = 'changed by a handler';
    assert.deepEqual(await names(), ['1'], 'a handler cannot change the kept rows');
    advance(999);
    assert.deepEqual(await names(), ['1']);
    advance(1);
    assert.deepEqual(await names(), ['2'], 'read again once 1 s old');
    assert.equal(reads.length, 2);
  });

  it("drops a list at its signal, and every list at a gap, at this process's own write and at `*`", async () => {
    const signals = new MemorySignals();
    const { reads, names, ownWrite } = keptLists(signals);
    assert.deepEqual(await names('org-a'), ['1']);
    assert.deepEqual(await names('org-b'), ['2']);
    signals.hear('instances', ['org-b/test', 'org-c/live']);
    assert.deepEqual(await names('org-a'), ['1'], "another list's signal leaves it");
    assert.deepEqual(await names('org-b'), ['3'], 'its own signal drops it');
    signals.gap();
    assert.deepEqual(await names('org-a'), ['4']);
    assert.deepEqual(await names('org-b'), ['5']);
    ownWrite();
    assert.deepEqual(await names('org-a'), ['6']);
    assert.deepEqual(await names('org-b'), ['7']);
    // A `TRUNCATE` of the table: every list.
    signals.hear('instances', ['*']);
    assert.deepEqual(await names('org-a'), ['8']);
    assert.deepEqual(await names('org-b'), ['9']);
    assert.deepEqual(reads, [
      'org-a/test',
      'org-b/test',
      'org-b/test',
      'org-a/test',
      'org-b/test',
      'org-a/test',
      'org-b/test',
      'org-a/test',
      'org-b/test',
    ]);
  });

  it('does not keep a read that a signal overtook, and reads every turn while not listening', async () => {
    const signals = new MemorySignals();
    const reads: string[] = [];
    let answer: (list: Instance[]) => void = () => undefined;
    const lists = new InstanceLists(
      noDb,
      (orgId, env) => {
        reads.push(`${orgId}/${env}`);
        return new Promise((resolve) => {
          answer = resolve;
        });
      },
      { signals },
    );
    /**
     * Asks for org-a's list, checks that the reader was called `count` times in all once the turn ended, runs
     * `meanwhile` (the read is under way), answers the read with an instance named `name`.
     * @returns the names of the list answered.
     */
    const ask = async (count: number, message: string, name: string, meanwhile = () => {}) => {
      const pending = lists.list('org-a', 'test');
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(reads.length, count, message);
      meanwhile();
      answer([instance('org-a', name)]);
      return (await pending).map((row) => row.name);
    };
    // The list changed while it was read: what it answers may be from before the change.
    assert.deepEqual(
      await ask(1, 'the read started', 'before', () => signals.hear('instances', ['org-a/test'])),
      ['before'],
    );
    assert.deepEqual(await ask(2, 'not kept: read again', 'after'), ['after']);
    assert.deepEqual(
      (await lists.list('org-a', 'test')).map((row) => row.name),
      ['after'],
      'this one kept',
    );
    assert.equal(reads.length, 2);
    signals.listening = false;
    assert.equal(lists.keeping, false);
    assert.deepEqual(await ask(3, 'not listening: the kept list is not used', 'down'), ['down']);
    // Back up without a gap told yet: the list read while down is not served.
    signals.listening = true;
    assert.deepEqual(await ask(4, 'nor is a list read while down kept', 'up again'), ['up again']);
  });
});
