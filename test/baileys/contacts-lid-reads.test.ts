/**
 * The live engine's contacts list names a contact stored under a LID by the phone JID of the pair parley keeps for it
 * (docs/decisions/0038-lid-mappings.md), reading the kept pairs of all such contacts in one statement: before, the
 * session's resolver read them one LID at a time, one statement per contact a session that had not learned the pair
 * itself (after a restart, or a hand-over to another node) listed. The list itself is unchanged: the contacts under a
 * kept LID merged with those stored under its phone JID, the others listed under their LID. Runs on SQLite, and on
 * PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Contact } from '../../src/domain/messages.ts';
import { CONTACTS_CATEGORY } from '../../src/engines/baileys/contacts.ts';
import { keptPairReads } from '../../src/sessions/engine-session.ts';
import { SqlAuthStateStore } from '../../src/store/engine-auth.ts';
import { upsertLidMappings } from '../../src/store/lid-mappings.ts';
import { testDialects } from '../support/store.ts';
import { FakeSessions } from './fake-sessions.ts';
import { type LiveFixture, liveFixture } from './support.ts';

const T0 = Date.parse('2030-01-01T00:00:00Z');
/** Contacts stored under a LID: the first KEPT have their pair kept by parley, the others none. */
const BY_LID = 40;
const KEPT = 30;
const phoneOf = (n: number) => `55119777${String(n).padStart(4, '0')}`;
const lidOf = (n: number) => `8${String(n).padStart(4, '0')}000333`;
const contact = (jid: string, fullName: string, pushName: string): Contact => ({
  jid,
  businessName: '',
  firstName: fullName.split(' ')[0] ?? '',
  fullName,
  pushName,
});

for (const dialect of testDialects()) {
  describe(`live contacts list: the LIDs of stored contacts resolved in one read of the kept pairs [${dialect}]`, () => {
    let fixture: LiveFixture;
    let sessions: FakeSessions;
    /** The SQL text of each statement the store ran while {@link counting}. */
    const statements: string[] = [];
    let counting = false;

    before(async () => {
      fixture = await liveFixture(dialect, 1, {
        faults: (text) => {
          if (counting) statements.push(text);
        },
      });
      sessions = new FakeSessions(fixture);
    });
    after(async () => {
      await sessions.close();
      await fixture.test.cleanup();
    });

    it('lists the contacts as before, with one statement for the kept pairs of all of them', async () => {
      const instanceId = fixture.instanceIds[0] ?? '';
      const db = fixture.test.store.db;
      // What an earlier session stored: contacts under LIDs whose number it did not know, and a few by number, three
      // of them the numbers of kept LIDs (their names win where they have one).
      const stored: Contact[] = [];
      for (let n = 0; n < BY_LID; n++) stored.push(contact(`${lidOf(n)}@lid`, `Lid ${n}`, `lid-${n}`));
      stored.push(contact(`${phoneOf(0)}@s.whatsapp.net`, 'Number Zero', ''));
      stored.push(contact(`${phoneOf(1)}@s.whatsapp.net`, '', 'number-one'));
      stored.push(contact(`${phoneOf(2)}@s.whatsapp.net`, 'Number Two', 'number-two'));
      stored.push(contact('5511966660000@s.whatsapp.net', 'Only Number', 'only'));
      await new SqlAuthStateStore(db, fixture.box, instanceId).set(
        stored.map((c) => ({ category: CONTACTS_CATEGORY, id: c.jid, value: JSON.stringify(c) })),
      );
      await upsertLidMappings(
        db,
        instanceId,
        Array.from({ length: KEPT }, (_, n) => ({ lid: lidOf(n), phone: phoneOf(n) })),
        T0,
      );
      const { session } = await sessions.setup({ context: keptPairReads(db, instanceId) });

      statements.length = 0;
      counting = true;
      const listed = await session.contacts();
      counting = false;

      const expected: Contact[] = [
        { ...contact(`${phoneOf(0)}@s.whatsapp.net`, 'Number Zero', 'lid-0') },
        { ...contact(`${phoneOf(1)}@s.whatsapp.net`, 'Lid 1', 'number-one') },
        contact(`${phoneOf(2)}@s.whatsapp.net`, 'Number Two', 'number-two'),
        contact('5511966660000@s.whatsapp.net', 'Only Number', 'only'),
      ];
      for (let n = 3; n < KEPT; n++)
        expected.push(contact(`${phoneOf(n)}@s.whatsapp.net`, `Lid ${n}`, `lid-${n}`));
      for (let n = KEPT; n < BY_LID; n++) expected.push(contact(`${lidOf(n)}@lid`, `Lid ${n}`, `lid-${n}`));
      expected.sort((a, b) => a.jid.localeCompare(b.jid));
      assert.deepEqual(listed, expected);

      const pairReads = statements.filter((text) => /lid_mappings/.test(text));
      assert.equal(pairReads.length, 1, `one read of the kept pairs:\n${pairReads.join('\n')}`);
      assert.ok(statements.length <= 3, `a bounded number of statements:\n${statements.join('\n')}`);

      // Listed again: the pairs are remembered, and the LIDs with none are known to have none.
      statements.length = 0;
      counting = true;
      assert.deepEqual(await session.contacts(), expected);
      counting = false;
      assert.deepEqual(
        statements.filter((text) => /lid_mappings/.test(text)),
        [],
      );
    });
  });
}
