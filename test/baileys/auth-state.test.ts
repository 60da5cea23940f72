import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import {
  type AuthenticationCreds,
  addTransactionCapability,
  BufferJSON,
  Curve,
  initAuthCreds,
  proto,
  type SignalDataSet,
  type SignalKeyStore,
} from 'baileys';
import { LIDMappingStore } from 'baileys/lib/Signal/lid-mapping.js';
import {
  CREDS_CATEGORY,
  CREDS_ID,
  encodeAuthValue,
  isPaired,
  loadAuthState,
  makeSqlKeyStore,
  SIGNAL_KEY_TYPES,
} from '../../src/engines/baileys/auth-state.ts';
import { BoundedCache } from '../../src/engines/baileys/cache.ts';
import { BaileysEngine } from '../../src/engines/baileys/index.ts';
import type { AuthStateStore } from '../../src/engines/engine.ts';
import { SqlSessionLocks } from '../../src/sessions/instance-lock.ts';
import { SqlAuthStateStore } from '../../src/store/engine-auth.ts';
import { type TransactionWork, TurnTransactions } from '../../src/store/turn-transactions.ts';
import { testDialects } from '../support/store.ts';
import { fakeFactory, pairedCreds } from './fake-socket.ts';
import { type LiveFixture, liveFixture, recordingContext, silentLogger } from './support.ts';

const logger = silentLogger();

/** One value of every key type Baileys 7 stores, shaped as Baileys produces them. */
function everyKeyType(): SignalDataSet {
  const pair = Curve.generateKeyPair();
  return {
    'pre-key': { '1': pair, '2': Curve.generateKeyPair() },
    session: { '5511988887777.0': randomBytes(180) },
    'sender-key': { '120363000000000001@g.us::99887766::3': randomBytes(90) },
    'sender-key-memory': { '120363000000000001@g.us': { '5511988887777:2@s.whatsapp.net': true } },
    'app-state-sync-key': {
      AAAAAKqH: proto.Message.AppStateSyncKeyData.fromObject({
        keyData: randomBytes(32),
        fingerprint: { rawId: 7, currentIndex: 1, deviceIndexes: [0, 1] },
        timestamp: 1_700_000_000_000,
      }),
    },
    'app-state-sync-version': {
      regular_high: {
        version: 12,
        hash: randomBytes(128),
        indexValueMap: { bWFj: { valueMac: randomBytes(32) } },
      },
    },
    'lid-mapping': { '5511988887777': '12345678', '12345678_reverse': '5511988887777' },
    'device-list': { '5511988887777': ['0', '2', '14'] },
    tctoken: {
      '12345678@lid': { token: randomBytes(40), timestamp: '1700000000', senderTimestamp: 1_700_000_100 },
    },
    'identity-key': { '5511988887777.0': randomBytes(33) },
  };
}

/** A store wrapper counting `set()` calls (one call = one transaction of the port). */
function counting(store: AuthStateStore): { store: AuthStateStore; sets: number[] } {
  const sets: number[] = [];
  return {
    sets,
    store: {
      get: (c, ids) => store.get(c, ids),
      list: (c) => store.list(c),
      clear: () => store.clear(),
      set: async (entries) => {
        sets.push(entries.length);
        await store.set(entries);
      },
    },
  };
}

/** The turn's shared transaction, noting the weight of every part it is given. */
class CountingTurn extends TurnTransactions {
  readonly weights: number[] = [];
  override run<R>(work: TransactionWork<R>, weight = 1): Promise<R> {
    this.weights.push(weight);
    return super.run(work, weight);
  }
}

for (const dialect of testDialects()) {
  describe(`auth state in the store (${dialect})`, () => {
    let fixture: LiveFixture;
    before(async () => {
      fixture = await liveFixture(dialect, 4);
    });
    after(async () => {
      await fixture.test.cleanup();
    });
    const storeOf = (i: number) =>
      new SqlAuthStateStore(fixture.test.store.db, fixture.box, fixture.instanceIds[i] ?? '');

    it('round-trips real initAuthCreds() credentials through BufferJSON, sealed at rest', async () => {
      const store = storeOf(0);
      const loaded = await loadAuthState(store, logger);
      assert.equal(isPaired(loaded.state.creds), false);
      const creds: AuthenticationCreds = { ...initAuthCreds(), ...pairedCreds() };
      Object.assign(loaded.state.creds, creds);
      await loaded.saveCreds();
      const again = await loadAuthState(storeOf(0), logger);
      assert.deepEqual(
        again.state.creds,
        JSON.parse(JSON.stringify(creds, BufferJSON.replacer), BufferJSON.reviver),
      );
      assert.ok(Buffer.isBuffer(again.state.creds.noiseKey.private));
      assert.deepEqual(Buffer.from(again.state.creds.noiseKey.private), Buffer.from(creds.noiseKey.private));
      assert.deepEqual(again.state.creds.signedPreKey.signature, Buffer.from(creds.signedPreKey.signature));
      const raw = await fixture.test.store.db
        .selectFrom('engine_auth')
        .select(['value'])
        .where('instance_id', '=', fixture.instanceIds[0] ?? '')
        .where('category', '=', CREDS_CATEGORY)
        .executeTakeFirstOrThrow();
      assert.match(raw.value, /^v1\./, 'AES-256-GCM sealed (docs/decisions/0020-security-promises.md)');
      assert.ok(!raw.value.includes(Buffer.from(creds.noiseKey.private).toString('base64')));
    });

    it('round-trips every Baileys 7 key type, one set() = one transaction, null deletes', async () => {
      const { store, sets } = counting(storeOf(1));
      const keys = makeSqlKeyStore(store);
      const data = everyKeyType();
      await keys.set(data);
      assert.deepEqual(sets, [12], 'one store write for the whole set()');
      const fresh = makeSqlKeyStore(storeOf(1));
      for (const type of SIGNAL_KEY_TYPES) {
        const expected = data[type] ?? {};
        const got = await fresh.get(type, [...Object.keys(expected), 'missing-id']);
        assert.deepEqual(Object.keys(got).sort(), Object.keys(expected).sort(), type);
        for (const [id, value] of Object.entries(expected)) {
          const roundTripped = JSON.parse(JSON.stringify(value, BufferJSON.replacer), BufferJSON.reviver);
          if (type === 'app-state-sync-key') {
            assert.ok(got[id] instanceof proto.Message.AppStateSyncKeyData, 'revived as the proto class');
            assert.deepEqual(
              proto.Message.AppStateSyncKeyData.encode(
                got[id] as proto.Message.IAppStateSyncKeyData,
              ).finish(),
              proto.Message.AppStateSyncKeyData.encode(value as proto.Message.IAppStateSyncKeyData).finish(),
            );
          } else assert.deepEqual(got[id], roundTripped, `${type}/${id}`);
        }
      }
      await keys.set({ 'pre-key': { '1': null }, session: { '5511988887777.0': null } });
      assert.deepEqual(Object.keys(await fresh.get('pre-key', ['1', '2'])), ['2']);
      assert.deepEqual(await fresh.get('session', ['5511988887777.0']), {});
    });

    it('serves Baileys through makeCacheableSignalKeyStore and its transaction layer (LID mapping store)', async () => {
      const loaded = await loadAuthState(storeOf(2), logger, { cache: new BoundedCache(60_000, 100) });
      const tx = addTransactionCapability(loaded.state.keys, logger, {
        maxCommitRetries: 1,
        delayBetweenTriesMs: 1,
      });
      const lids = new LIDMappingStore(tx, logger);
      await lids.storeLIDPNMappings([{ lid: '12345678@lid', pn: '5511988887777@s.whatsapp.net' }]);
      const rows = await storeOf(2).list('lid-mapping');
      assert.deepEqual(Object.fromEntries(rows), {
        '5511988887777': '"12345678"',
        '12345678_reverse': '"5511988887777"',
      });
      const other = await loadAuthState(storeOf(2), logger);
      const otherTx = addTransactionCapability(other.state.keys, logger, {
        maxCommitRetries: 1,
        delayBetweenTriesMs: 1,
      });
      assert.equal(
        await new LIDMappingStore(otherTx, logger).getPNForLID('12345678@lid'),
        '5511988887777:0@s.whatsapp.net',
      );
      await loaded.close();
    });

    it("writes a turn's keys of several instances in the turn's shared transaction; a refused write fails alone", async () => {
      const { db } = fixture.test.store;
      const turn = new CountingTurn(db);
      const store = (instanceId: string) => new SqlAuthStateStore(db, fixture.box, instanceId, { turn });
      const first = fixture.instanceIds[0] ?? '';
      const second = fixture.instanceIds[1] ?? '';
      const settled = await Promise.allSettled([
        store(first).set([
          { category: 'session', id: 'turn-a', value: '"a"' },
          { category: 'session', id: 'turn-b', value: '"b"' },
        ]),
        store(second).set([{ category: 'session', id: 'turn-c', value: '"c"' }]),
        // No such instance: the foreign key refuses it, and only this caller sees the error.
        store('no-such-instance').set([{ category: 'session', id: 'turn-d', value: '"d"' }]),
      ]);
      assert.deepEqual(turn.weights, [2, 1, 1], 'one part per set(), weighing its entries');
      assert.deepEqual(
        settled.map((result) => result.status),
        ['fulfilled', 'fulfilled', 'rejected'],
      );
      const rows = await db
        .selectFrom('engine_auth')
        .select(['instance_id', 'key_id', 'value'])
        .where('key_id', 'in', ['turn-a', 'turn-b', 'turn-c', 'turn-d'])
        .orderBy('key_id')
        .execute();
      assert.deepEqual(
        rows.map((row) => [row.instance_id, row.key_id]),
        [
          [first, 'turn-a'],
          [first, 'turn-b'],
          [second, 'turn-c'],
        ],
      );
      for (const row of rows) assert.match(row.value, /^v1\./, 'sealed before the transaction');
      assert.deepEqual(Object.fromEntries(await store(first).get('session', ['turn-a', 'turn-b'])), {
        'turn-a': '"a"',
        'turn-b': '"b"',
      });
      await store(first).set([{ category: 'session', id: 'turn-a', value: null }]);
      assert.deepEqual([...(await store(first).get('session', ['turn-a', 'turn-b'])).keys()], ['turn-b']);
    });

    it('discards half-registered credentials (abandoned pairing) and logout deletes everything', async () => {
      const store = storeOf(3);
      const unpaired = initAuthCreds();
      unpaired.me = { id: '5511900000000@s.whatsapp.net', name: '~' };
      await store.set([{ category: CREDS_CATEGORY, id: CREDS_ID, value: encodeAuthValue(unpaired) }]);
      const keys: SignalKeyStore = makeSqlKeyStore(store);
      await keys.set({ 'pre-key': { '9': Curve.generateKeyPair() } });
      const loaded = await loadAuthState(store, logger);
      assert.equal(loaded.state.creds.me, undefined, 'fresh credentials');
      assert.equal((await store.list('pre-key')).size, 0, 'stale keys gone');

      const paired = pairedCreds();
      await store.set([{ category: CREDS_CATEGORY, id: CREDS_ID, value: encodeAuthValue(paired) }]);
      await makeSqlKeyStore(store).set(everyKeyType());
      const fake = fakeFactory((sock) => sock.open());
      const engine = new BaileysEngine({
        locks: new SqlSessionLocks({ db: fixture.test.store.db, owner: 'p' }),
        logger,
        socketFactory: fake.factory,
      });
      const rc = recordingContext(fixture, fixture.instanceIds[3] ?? '');
      const session = engine.createSession(rc.context);
      await session.connect();
      assert.equal(session.state().loggedIn, true);
      await session.logout();
      assert.equal(fake.sockets[0]?.loggedOut, true, 'remove-companion-device sent');
      const left = await fixture.test.store.db
        .selectFrom('engine_auth')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('instance_id', '=', fixture.instanceIds[3] ?? '')
        .executeTakeFirstOrThrow();
      assert.equal(Number(left.n), 0);
      assert.deepEqual(session.state(), {
        connected: false,
        loggedIn: false,
        jid: null,
        phone: null,
        pushName: null,
      });
      await engine.close();
    });
  });
}
