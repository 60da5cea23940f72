import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import type { Instance } from '../../src/domain/instance.ts';
import { setNodeEndpoint } from '../../src/store/leases.ts';
import { upsertNode } from '../../src/store/nodes.ts';
import type { TestStore } from '../support/store.ts';

// What the lease tests share (docs/decisions/0008-leases-and-fencing.md): a stand-in for the session manager, and a
// store with an organization's instances and two registered nodes.

/** A stand-in for the SessionManager: records restores (as connects) and closes. */
export function fakeSessions() {
  const open = new Map<string, { connected: boolean }>();
  const connected: string[] = [];
  const released: string[] = [];
  const releasedAt: number[] = [];
  return {
    connected,
    released,
    releasedAt,
    async restore(id: string) {
      const entry = open.get(id) ?? { connected: false };
      open.set(id, entry);
      entry.connected = true;
      connected.push(id);
      return true;
    },
    existing(id: string) {
      const entry = open.get(id);
      return entry ? ({ state: () => ({ connected: entry.connected, loggedIn: true }) } as never) : undefined;
    },
    async release(id: string) {
      if (open.delete(id)) {
        released.push(id);
        releasedAt.push(Date.now());
      }
    },
    ids: () => [...open.keys()],
    /** A session here not connected yet is still connecting: it comes back by itself. */
    comingBack: () => true,
    restoreFailed: () => false,
  };
}

/**
 * `count` instances of a new organization, linked and wanted connected, and nodes `node-a` and `node-b` registered
 * (heartbeat now; `node-b` serving at `http://b.invalid`).
 */
export async function setup(testStore: TestStore, count: number) {
  const db = testStore.store.db;
  const org = await adminCreateOrg(db, { name: `n-${Math.random()}`, plan: 'pro' });
  const instances: Instance[] = [];
  for (let i = 0; i < count; i++) {
    const instance = await adminCreateInstance(db, { org: org.id, env: 'test', name: `i${i}` });
    await db
      .updateTable('instances')
      .set({ jid: `55119000000${i}@s.whatsapp.net`, desired_state: 'connected' })
      .where('id', '=', instance.id)
      .execute();
    instances.push({ ...instance, jid: `55119000000${i}@s.whatsapp.net`, desiredState: 'connected' });
  }
  for (const id of ['node-a', 'node-b']) {
    await upsertNode(db, {
      id,
      host: 'h',
      pid: 1,
      startedAt: new Date().toISOString(),
      heartbeatAt: Date.now(),
    });
  }
  await setNodeEndpoint(db, 'node-b', { url: 'http://b.invalid', draining: false });
  return { db, instances };
}
