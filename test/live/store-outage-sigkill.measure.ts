/**
 * Measures what a SIGKILL during a PostgreSQL outage loses (docs/deploy.md, What a database restart does); not part
 * of the suite, run by hand:
 *
 *   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx test/live/store-outage-sigkill.measure.ts
 *
 * parley runs as a child process on a database of its own with one live instance linked to a simulator account; a
 * simulated user writes a message every 100 ms. The database refuses connections (backends terminated) for
 * OUTAGE_MS, parley is killed with SIGKILL in the middle of it, the database comes back and a new parley process
 * starts on it (restoring the session). Prints, as one JSON line, how many messages the user wrote and how many
 * were never stored: those parley had acknowledged to the platform and held in memory when it was killed.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { startReceiver } from '../support/https-receiver.ts';
import { createOutageDatabase } from '../support/outage-database.ts';
import { type Child, childEnv, configure, newSecretKey, seed, startChild } from '../webhooks/child.ts';
import { control, simCaFile, startTestSimulator } from './support.ts';

const OUTAGE_MS = Number(process.env.OUTAGE_MS ?? 20_000);
const PEER = '5511988880007';
const ACCOUNT = '5511920000097';

const database = await createOutageDatabase();
const sim = await startTestSimulator();
const receiver = await startReceiver();
const { testStore } = database;
const env = {
  ...childEnv(testStore, newSecretKey()),
  PLATFORM_URL: sim.url,
  PLATFORM_ROOT_KEY: sim.rootKey.toString('hex'),
  PLATFORM_CA_FILE: simCaFile(sim),
};
let node: Child | undefined;
try {
  node = await startChild(env, 'sigkill-a');
  const { instances, key } = await seed(testStore, 1, { unlimited: true, env: 'live' });
  const instanceId = instances[0]?.id ?? '';
  const from = `?from=${instanceId}`;
  await control(sim, 'POST', '/users', { phone: PEER, pushName: 'Peer' });
  await control(sim, 'POST', '/users', { phone: ACCOUNT, pushName: 'Shop' });
  await configure(node, key, instanceId, receiver.url);
  const qr = await node.call('GET', `/v1/session/qr${from}`, key);
  await control(sim, 'POST', '/scan', { code: qr.body.data.code, phone: ACCOUNT });
  const linked = async (child: Child) => {
    for (;;) {
      const status = (await child.call('GET', `/v1/session/status${from}`, key).catch(() => undefined))?.body
        ?.data;
      if (status?.connected && status.loggedIn) return;
      await sleep(100);
    }
  };
  await linked(node);
  const written: string[] = [];
  let streaming = true;
  const stream = (async () => {
    for (let i = 1; streaming; i++) {
      const response = await control(sim, 'POST', '/messages', { from: PEER, to: ACCOUNT, text: `k ${i}` });
      if (response.status === 201) written.push(String(response.body.id));
      await sleep(100);
    }
  })();
  const stored = async () =>
    new Set(
      (
        await testStore.store.db
          .selectFrom('messages')
          .select('id')
          .where('instance_id', '=', instanceId)
          .execute()
      ).map((row) => row.id),
    );
  while ((await stored()).size < 5) await sleep(100);
  const downAtIndex = written.length;
  await database.takeDown();
  await sleep(OUTAGE_MS / 2);
  const metrics = await fetch(`http://127.0.0.1:${node.port}/metrics`).then((r) => r.text());
  const backlog = Number(metrics.match(/^parley_inbound_backlog (\d+)/m)?.[1] ?? Number.NaN);
  await node.kill();
  const writtenAtKill = written.length;
  await sleep(OUTAGE_MS / 2);
  await database.bringBack();
  node = await startChild(env, 'sigkill-b');
  await linked(node);
  const afterRestart = written.length;
  while (written.length < afterRestart + 10) await sleep(100);
  streaming = false;
  await stream;
  // Everything the platform still holds arrives after the new login: wait until nothing new is stored for 15 s.
  let missing: string[] = [];
  let storedCount = -1;
  let quietSince = Date.now();
  const started = Date.now();
  for (;;) {
    const ids = await stored();
    missing = written.filter((id) => !ids.has(id));
    if (missing.length === 0) break;
    if (ids.size !== storedCount) {
      storedCount = ids.size;
      quietSince = Date.now();
    }
    if (Date.now() - quietSince > 15_000) break;
    await sleep(500);
  }
  const catchUpMs = Date.now() - started;
  process.stdout.write(
    `${JSON.stringify({ outageMs: OUTAGE_MS, written: written.length, writtenAtKill, backlogAtKill: backlog, lost: missing.length, catchUpMs, downAtIndex, missingAt: missing.map((id) => written.indexOf(id)) })}\n`,
  );
} finally {
  await node?.terminate();
  await receiver.close();
  await sim.close();
  await database.drop();
}
