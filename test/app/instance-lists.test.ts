import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { InstanceLists } from '../../src/app/instance-lists.ts';
import type { Environment } from '../../src/domain/environment.ts';
import type { Instance, InstanceId } from '../../src/domain/instance.ts';
import type { Database } from '../../src/store/schema.ts';

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
