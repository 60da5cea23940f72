import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ABSENT_IDS_MAX, AuthStoreMemo } from '../../src/engines/baileys/auth-memo.ts';
import { CONTACTS_CATEGORY } from '../../src/engines/baileys/contacts.ts';
import type { AuthStateStore } from '../../src/engines/engine.ts';
import { SqlAuthStateStore } from '../../src/store/engine-auth.ts';
import { testDialects } from '../support/store.ts';
import { type LiveFixture, liveFixture } from './support.ts';

/** The store under the memo, noting every id it is asked to read; `hold()` keeps the next read from answering. */
class ObservedStore implements AuthStateStore {
  readonly asked: string[] = [];
  readonly #store: AuthStateStore;
  #held: { gate: Promise<void>; reached: () => void } | undefined;

  constructor(store: AuthStateStore) {
    this.#store = store;
  }

  /** The next read, once it has read the store (`reached`), waits for `release` before it answers. */
  hold(): { release: () => void; reached: Promise<void> } {
    let release = () => {};
    let arrive = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const reached = new Promise<void>((resolve) => {
      arrive = resolve;
    });
    this.#held = { gate, reached: arrive };
    return { release: () => release(), reached };
  }

  async get(category: string, ids: readonly string[]): Promise<Map<string, string>> {
    this.asked.push(...ids.map((id) => `${category}/${id}`));
    const found = await this.#store.get(category, ids);
    const held = this.#held;
    this.#held = undefined;
    if (held) {
      held.reached();
      await held.gate;
    }
    return found;
  }
  set(entries: readonly { category: string; id: string; value: string | null }[]): Promise<void> {
    return this.#store.set(entries);
  }
  list(category: string): Promise<Map<string, string>> {
    return this.#store.list(category);
  }
  clear(): Promise<void> {
    return this.#store.clear();
  }
}

for (const dialect of testDialects()) {
  describe(`auth store memo of a live session (${dialect})`, () => {
    let fixture: LiveFixture;
    before(async () => {
      fixture = await liveFixture(dialect, 6);
    });
    after(async () => {
      await fixture.test.cleanup();
    });
    /** A memo over instance `i`'s store (an unknown id for a store that refuses every write). */
    const memoOf = (i: number | string) => {
      const instanceId = typeof i === 'number' ? (fixture.instanceIds[i] ?? '') : i;
      const observed = new ObservedStore(
        new SqlAuthStateStore(fixture.test.store.db, fixture.box, instanceId),
      );
      return { observed, memo: new AuthStoreMemo(observed, [CONTACTS_CATEGORY]) };
    };

    it('asks the store once for an absent id, until a write names it', async () => {
      const { observed, memo } = memoOf(0);
      assert.deepEqual([...(await memo.get('device-list', ['5511911112222']))], []);
      assert.deepEqual([...(await memo.get('device-list', ['5511911112222']))], []);
      assert.deepEqual(
        observed.asked,
        ['device-list/5511911112222'],
        'the second read is answered by the memo',
      );
      await memo.set([{ category: 'device-list', id: '5511911112222', value: '["0"]' }]);
      assert.deepEqual(
        [...(await memo.get('device-list', ['5511911112222', '5511933334444']))],
        [['5511911112222', '["0"]']],
      );
      assert.deepEqual(observed.asked.slice(1), ['device-list/5511911112222', 'device-list/5511933334444']);
      // Other categories' values are not kept: Baileys' own key cache keeps them.
      await memo.get('device-list', ['5511911112222']);
      assert.equal(observed.asked.at(-1), 'device-list/5511911112222');
      await memo.set([{ category: 'device-list', id: '5511911112222', value: null }]);
      const before = observed.asked.length;
      assert.deepEqual([...(await memo.get('device-list', ['5511911112222']))], []);
      assert.equal(observed.asked.length, before, 'deleted by this memo: known absent');
    });

    it('keeps the contact book once read or written, and forgets everything on clear', async () => {
      const { observed, memo } = memoOf(1);
      await memo.set([{ category: CONTACTS_CATEGORY, id: 'a@s.whatsapp.net', value: '{"pushName":"A"}' }]);
      assert.deepEqual(
        [...(await memo.get(CONTACTS_CATEGORY, ['a@s.whatsapp.net']))],
        [['a@s.whatsapp.net', '{"pushName":"A"}']],
      );
      assert.deepEqual(observed.asked, [], 'written by this memo: not read again');
      const other = memoOf(1);
      assert.deepEqual(
        [...(await other.memo.get(CONTACTS_CATEGORY, ['a@s.whatsapp.net']))],
        [['a@s.whatsapp.net', '{"pushName":"A"}']],
      );
      await other.memo.get(CONTACTS_CATEGORY, ['a@s.whatsapp.net']);
      assert.deepEqual(other.observed.asked, ['contacts/a@s.whatsapp.net'], 'read once, then kept');
      await memo.clear();
      assert.deepEqual([...(await memo.get(CONTACTS_CATEGORY, ['a@s.whatsapp.net']))], []);
      assert.deepEqual(observed.asked, ['contacts/a@s.whatsapp.net'], 'asked again after clear');
    });

    it('remembers nothing from a read that a write ran beside', async () => {
      const { observed, memo } = memoOf(2);
      const gate = observed.hold();
      const reading = memo.get('session', ['5511955556666.0']);
      await gate.reached;
      const writing = memo.set([{ category: 'session', id: '5511955556666.0', value: '"s"' }]);
      await writing;
      gate.release();
      assert.deepEqual([...(await reading)], [], 'the read saw the store before the write');
      assert.deepEqual([...(await memo.get('session', ['5511955556666.0']))], [['5511955556666.0', '"s"']]);
      assert.equal(observed.asked.length, 2, 'the racing read was not remembered as absent');

      const contactGate = observed.hold();
      const contactRead = memo.get(CONTACTS_CATEGORY, ['b@s.whatsapp.net']);
      await contactGate.reached;
      await memo.set([{ category: CONTACTS_CATEGORY, id: 'b@s.whatsapp.net', value: '{"pushName":"B"}' }]);
      contactGate.release();
      await contactRead;
      assert.deepEqual(
        [...(await memo.get(CONTACTS_CATEGORY, ['b@s.whatsapp.net']))],
        [['b@s.whatsapp.net', '{"pushName":"B"}']],
      );
    });

    it('forgets what a failed write named', async () => {
      // No such instance: the store refuses the write (foreign key).
      const { observed, memo } = memoOf('no-such-instance');
      await memo.get(CONTACTS_CATEGORY, ['c@s.whatsapp.net']);
      await assert.rejects(
        memo.set([{ category: CONTACTS_CATEGORY, id: 'c@s.whatsapp.net', value: '{"pushName":"C"}' }]),
      );
      await memo.get(CONTACTS_CATEGORY, ['c@s.whatsapp.net']);
      assert.deepEqual(observed.asked, ['contacts/c@s.whatsapp.net', 'contacts/c@s.whatsapp.net']);
    });

    it(`remembers at most ${ABSENT_IDS_MAX} absent ids, forgetting the oldest`, async () => {
      const { observed, memo } = memoOf(3);
      const ids = Array.from({ length: ABSENT_IDS_MAX + 1 }, (_, k) => `u${k}`);
      await memo.get('device-list', ids);
      await memo.get('device-list', ['u0', 'u1', `u${ABSENT_IDS_MAX}`]);
      assert.deepEqual(observed.asked.slice(ids.length), ['device-list/u0'], 'only the oldest was forgotten');
    });
  });
}
