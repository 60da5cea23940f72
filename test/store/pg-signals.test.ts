/**
 * Signals between the nodes of a PostgreSQL store (docs/decisions/0078-store-signals.md): what one node publishes
 * reaches the others and not itself, nor a store in another schema; a revocation or a plan change committed by any
 * process is signalled; and the listening connection comes back after its backend is terminated or its server goes
 * silent, telling its listeners of the gap.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { insertApiKey, type NewApiKey, revokeApiKey } from '../../src/store/api-keys.ts';
import { openStore } from '../../src/store/database.ts';
import { createInstance } from '../../src/store/instances.ts';
import { migrateToLatest } from '../../src/store/migrate.ts';
import { createOrganization, updateOrganizationPlan } from '../../src/store/organizations.ts';
import {
  decodeSignals,
  encodeSignals,
  MAX_PAYLOAD_BYTES,
  PgSignals,
  type SignalTopic,
  signalSchemaField,
  signalsApplicationName,
} from '../../src/store/pg-signals.ts';
import { eventually } from '../support/eventually.ts';
import { type FlightProxy, startFlightProxy } from '../support/flight-proxy.ts';
import { urlThrough } from '../support/probe-table.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

describe('signal payloads', () => {
  it('carry the schema, the node and the items, split where a payload would pass its bound', () => {
    const items = Array.from(
      { length: 500 },
      (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    );
    const payloads = encodeSignals('parley_test', 'n1', items);
    assert.equal(payloads.length, 3);
    for (const payload of payloads) {
      assert.ok(Buffer.byteLength(payload) <= MAX_PAYLOAD_BYTES, `${Buffer.byteLength(payload)} bytes`);
      assert.ok(payload.startsWith('parley_test n1 '));
    }
    assert.deepEqual(
      payloads.flatMap((payload) => decodeSignals(payload, 'parley_test', 'n2') ?? []),
      items,
    );
  });

  it("are ignored when this node published them, or another schema's node did", () => {
    const [payload] = encodeSignals('parley_test', 'n1', ['a']);
    assert.ok(payload);
    assert.equal(decodeSignals(payload, 'parley_test', 'n1'), undefined);
    assert.equal(decodeSignals(payload, 'other', 'n2'), undefined);
    assert.deepEqual(decodeSignals(payload, 'parley_test', 'n2'), ['a']);
    assert.equal(decodeSignals('parley_test n1', 'parley_test', 'n2'), undefined);
  });

  it('write a schema with spaces or % so that no other schema reads it as its own', () => {
    const [payload] = encodeSignals('sig test', 'n1', ['a']);
    assert.equal(payload, 'sig%20test n1 a');
    assert.deepEqual(decodeSignals(payload ?? '', 'sig test', 'n2'), ['a']);
    assert.equal(decodeSignals(payload ?? '', 'sig', 'n2'), undefined);
    assert.equal(decodeSignals(payload ?? '', 'sig%20test', 'n2'), undefined);
    assert.equal(signalSchemaField('sig%20test'), 'sig%2520test');
  });

  it('refuse an item with a space or an empty one (a caller bug)', () => {
    assert.throws(() => encodeSignals('s', 'n1', ['a b']), /without spaces/);
    assert.throws(() => encodeSignals('s', 'n1', ['']), /without spaces/);
  });
});

/** Collects what `signals` hears on `topic`. */
function heard(signals: PgSignals, topic: SignalTopic): string[][] {
  const got: string[][] = [];
  signals.subscribe(topic, (items) => got.push([...items]));
  return got;
}

for (const dialect of testDialects().filter((d) => d === 'postgres')) {
  describe(`store signals (${dialect})`, () => {
    let ts: TestStore;
    let url: string;
    const opened: PgSignals[] = [];
    const errors: Error[] = [];

    const open = async (
      nodeId: string,
      options: { schema?: string; through?: FlightProxy; retryMs?: number } = {},
    ) => {
      const signals = new PgSignals({
        url: options.through ? urlThrough(new URL(url), options.through) : url,
        schema: options.schema ?? 'parley_test',
        nodeId,
        timing: {
          retryMs: options.retryMs ?? 20,
          maxRetryMs: options.retryMs ?? 200,
          pingMs: 100,
          answerTimeoutMs: 300,
        },
        onError: (error) => errors.push(error),
      });
      opened.push(signals);
      await signals.start();
      assert.equal(signals.listening, true);
      return signals;
    };

    const terminate = async (nodeId: string): Promise<number> => {
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      try {
        const result = await admin.query(
          'select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1',
          [signalsApplicationName(nodeId)],
        );
        return result.rowCount ?? 0;
      } finally {
        await admin.end();
      }
    };

    before(async () => {
      ts = await createTestStore(dialect);
      url = (ts.database as { url: string }).url;
    });

    after(async () => {
      for (const signals of opened) await signals.close();
      await ts.cleanup();
    });

    it("tells the other nodes of the store what one publishes, not itself nor another schema's", async () => {
      const n1 = await open('n1');
      const n2 = await open('n2');
      const elsewhere = await open('n3', { schema: 'another_schema' });
      const own = heard(n1, 'events');
      const got = heard(n2, 'events');
      const otherSchema = heard(elsewhere, 'events');
      const keys = heard(n2, 'keys');
      n1.publish('events', ['i1', 'i2']);
      n1.publish('events', ['i3']);
      await eventually('n2 hears both signals', () => got.length === 2);
      assert.deepEqual(got, [['i1', 'i2'], ['i3']]);
      // n2 publishes after n1: once n1 heard it, n1's own two signals would have come before it.
      const back = heard(n1, 'events');
      n2.publish('events', ['i4']);
      await eventually('n1 hears n2', () => back.length === 1);
      assert.deepEqual(own, [['i4']]);
      assert.deepEqual(otherSchema, []);
      assert.deepEqual(keys, []);
    });

    it('signals a revocation when it commits, from any process of the store', async () => {
      const n1 = await open('n4');
      const keys = heard(n1, 'keys');
      const org = await createOrganization(ts.store.db, { name: 'signals', plan: 'pro' });
      const newKey = (name: string, hash: string): NewApiKey => ({
        orgId: org.id,
        env: 'test',
        name,
        prefix: 'svc_test_ab',
        keyHash: hash.repeat(64),
        scopes: ['chat:*'],
        instanceIds: [],
        expiresAt: null,
      });
      const key = await insertApiKey(ts.store.db, newKey('to revoke', 'f'));
      const revoked = await revokeApiKey(ts.store.db, key.id);
      assert.ok(revoked?.revokedAt);
      await eventually('the revocation is heard', () => keys.length === 1);
      assert.deepEqual(keys, [[key.id]]);
      // Revoked again: nothing changed, nothing is signalled (a later signal shows the channel still works).
      await revokeApiKey(ts.store.db, key.id);
      const second = await insertApiKey(ts.store.db, newKey('second', 'e'));
      await revokeApiKey(ts.store.db, second.id);
      await eventually('the second revocation is heard', () => keys.length === 2);
      assert.deepEqual(keys, [[key.id], [second.id]]);
    });

    it("signals a change of an organization's plan when it commits, for the key caches to look at once", async () => {
      const n1 = await open('n5');
      const keys = heard(n1, 'keys');
      const org = await createOrganization(ts.store.db, { name: 'plan-signals', plan: 'free' });
      const limits = { perMinute: null, perDay: null, maxInstances: null };
      assert.equal(
        (await updateOrganizationPlan(ts.store.db, org.id, { plan: 'pro', ...limits }))?.plan,
        'pro',
      );
      await eventually('the plan change is heard', () => keys.length === 1);
      assert.deepEqual(keys, [[org.id]]);
      // No organization has that id: nothing changed, nothing is signalled (a later change shows the channel works).
      assert.equal(
        await updateOrganizationPlan(ts.store.db, crypto.randomUUID(), { plan: 'pro', ...limits }),
        undefined,
      );
      await updateOrganizationPlan(ts.store.db, org.id, { plan: 'free', ...limits });
      await eventually('the second change is heard', () => keys.length === 2);
      assert.deepEqual(keys, [[org.id], [org.id]]);
    });

    it('signals the instances, truncation and revocations of a store whose schema name holds a space, to it alone', async () => {
      // An operator's DATABASE_URL may set a quoted search_path: the store lives in "sig test", and a store in
      // schema "sig" (the name's first word) shares the database.
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query('create schema "sig test"');
      await admin.end();
      const spaced = new URL(url);
      spaced.searchParams.set('options', '-c search_path="sig\\ test"');
      const store = await openStore({ dialect: 'postgres', url: spaced.toString() });
      try {
        assert.equal(store.schema, 'sig test');
        await migrateToLatest(store);
        const own = await open('n11', { schema: 'sig test' });
        const firstWord = await open('n12', { schema: 'sig' });
        const instances = heard(own, 'instances');
        const keys = heard(own, 'keys');
        const misreadInstances = heard(firstWord, 'instances');
        const misreadKeys = heard(firstWord, 'keys');
        const org = await createOrganization(store.db, { name: 'spaced', plan: 'pro' });
        await createInstance(store.db, { orgId: org.id, env: 'test', name: 'main' });
        const key = await insertApiKey(store.db, {
          orgId: org.id,
          env: 'test',
          name: 'to revoke',
          prefix: 'svc_test_ab',
          keyHash: 'd'.repeat(64),
          scopes: ['chat:*'],
          instanceIds: [],
          expiresAt: null,
        });
        await revokeApiKey(store.db, key.id);
        await eventually(
          'the instance and the revocation are heard',
          () => instances.length === 1 && keys.length === 1,
        );
        assert.deepEqual(instances, [[`${org.id}/test`]]);
        assert.deepEqual(keys, [[key.id]]);
        // A TRUNCATE is signalled by its statement trigger as every list ('*').
        await sql`truncate table instances cascade`.execute(store.db);
        await eventually('the truncation is heard', () => instances.length === 2);
        assert.deepEqual(instances[1], ['*']);
        // A marker for schema "sig", sent after these commits, reaches its node after anything they sent it.
        const marker = heard(firstWord, 'events');
        const probe = await open('n13', { schema: 'sig' });
        probe.publish('events', ['marker']);
        await eventually('the "sig" node hears its marker', () => marker.length === 1);
        assert.deepEqual([misreadInstances, misreadKeys], [[], []]);
      } finally {
        await store.destroy();
      }
    });

    it('listens again after its backend is terminated, and tells of the gap', async () => {
      const n5 = await open('n5');
      const n6 = await open('n6');
      const got = heard(n6, 'events');
      let gaps = 0;
      n6.onGap(() => {
        gaps += 1;
      });
      errors.length = 0;
      assert.equal(await terminate('n6'), 1);
      await eventually('the terminated connection is noticed', () => errors.length > 0);
      await eventually('n6 listens again', () => gaps === 1 && n6.listening);
      n5.publish('events', ['after-restart']);
      await eventually('n6 hears a signal published after', () => got.length === 1);
      assert.deepEqual(got, [['after-restart']]);
    });

    it('drops what is published while its connection is down, without throwing or waiting', async () => {
      // A second between its loss and its next attempt: the publish below runs in the same turn as the check that
      // saw the loss, long before the retry's timer.
      const n7 = await open('n7', { retryMs: 1_000 });
      const n8 = await open('n8');
      const got = heard(n8, 'events');
      errors.length = 0;
      assert.equal(await terminate('n7'), 1);
      await eventually('n7 notices', () => errors.length > 0);
      assert.equal(n7.listening, false);
      n7.publish('events', ['lost']);
      await eventually('n7 listens again', () => n7.listening);
      n7.publish('events', ['kept']);
      await eventually('n8 hears the later signal', () => got.length > 0);
      assert.deepEqual(got, [['kept']]);
    });

    it('gives up a connection whose server goes silent before its LISTEN is answered, and connects again', async () => {
      const proxy = await startFlightProxy({
        host: new URL(url).hostname,
        port: Number(new URL(url).port || 5432),
      });
      try {
        proxy.freezeAt('LISTEN');
        errors.length = 0;
        const late = new PgSignals({
          url: urlThrough(new URL(url), proxy),
          schema: 'parley_test',
          nodeId: 'n11',
          timing: { retryMs: 20, maxRetryMs: 200, pingMs: 100, answerTimeoutMs: 300 },
          onError: (error) => errors.push(error),
        });
        opened.push(late);
        // The first attempt ends (its start resolves) instead of waiting on the silent server for ever.
        await late.start();
        assert.equal(late.listening, false);
        assert.match(errors[0]?.message ?? '', /did not answer in 300 ms/);
        const got = heard(late, 'events');
        await eventually('it listens on a second connection', () => late.listening);
        const publisher = await open('n12');
        publisher.publish('events', ['after-a-silent-start']);
        await eventually('the second connection hears', () => got.length === 1);
        assert.deepEqual(got, [['after-a-silent-start']]);
      } finally {
        await proxy.close();
      }
    });

    it('closes a connection whose server goes silent and listens on a new one', async () => {
      const proxy = await startFlightProxy({
        host: new URL(url).hostname,
        port: Number(new URL(url).port || 5432),
      });
      try {
        const silent = await open('n9', { through: proxy });
        const publisher = await open('n10');
        const got = heard(silent, 'events');
        let gaps = 0;
        silent.onGap(() => {
          gaps += 1;
        });
        errors.length = 0;
        proxy.freeze();
        await eventually('the silence is noticed', () =>
          errors.find((error) => /did not answer/.test(error.message)),
        );
        await eventually('it listens on a new connection', () => gaps === 1 && silent.listening);
        publisher.publish('events', ['after-silence']);
        await eventually('the new connection hears', () => got.length === 1);
        assert.deepEqual(got, [['after-silence']]);
      } finally {
        await proxy.close();
      }
    });
  });
}
