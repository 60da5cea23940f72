/**
 * The store side of receipts that come before their send is recorded (src/store/held-receipts.ts,
 * docs/decisions/0104-receipts-before-their-send.md): a peer's receipt moves stored messages as before and is held
 * only for a send job still `pending` or `sending` to the receipt's chat (or a LID parley keeps for its number); the
 * marks and finishes that end such a job say so (a mark riding on the sequence's advance leaves it to its relay's
 * finish); the held receipts are taken back in order, and go with their job. On SQLite, and on PostgreSQL when
 * TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { adminCreateInstance } from '../../src/app/instances.ts';
import { adminCreateOrg } from '../../src/app/organizations.ts';
import { advanceMarking } from '../../src/store/advance-marks.ts';
import { advanceOrHoldReceipt, type PeerReceipt, takeHeldReceipts } from '../../src/store/held-receipts.ts';
import { upsertLidMappings } from '../../src/store/lid-mappings.ts';
import { insertMessages } from '../../src/store/messages.ts';
import { finishSendJob } from '../../src/store/send-job-claims.ts';
import { markSendJobsSent } from '../../src/store/send-job-marks.ts';
import { insertSendJobs, type NewSendJob } from '../../src/store/send-jobs.ts';
import { createTestStore, type TestStore, testDialects } from '../support/store.ts';

const ANA = '5511988887777@s.whatsapp.net';
const BIA = '5511977776666@s.whatsapp.net';
const AT = '2026-01-15T12:00:00.000Z';

for (const dialect of testDialects()) {
  describe(`receipts held for sends not recorded yet [${dialect}]`, () => {
    let testStore: TestStore;
    let instanceId: string;
    let seq = 0;

    before(async () => {
      testStore = await createTestStore(dialect);
      const db = testStore.store.db;
      const org = await adminCreateOrg(db, { name: 'held', plan: 'pro' });
      instanceId = (await adminCreateInstance(db, { org: org.id, env: 'test', name: 'h' })).id;
    });
    after(async () => {
      await testStore.cleanup();
    });

    /** Stores job `id` to `chat`, claimed (`sending`) unless `pending`. */
    async function job(id: string, chat = ANA, pending = false): Promise<void> {
      seq += 1;
      const row: NewSendJob = {
        instanceId,
        id,
        seq,
        chat,
        kind: 'text',
        payload: '{"body":"hi"}',
        mode: 'sync',
        runAt: 1_000,
        sendAt: null,
        maxAttempts: 3,
        now: 1_000,
        ...(pending ? {} : { claimedBy: 'node-1' }),
      };
      await insertSendJobs(testStore.store.db, [row]);
    }

    const receipt = (ids: string[], over: Partial<PeerReceipt> = {}): PeerReceipt => ({
      ids,
      state: 'read',
      source: { chat: ANA, sender: ANA, isFromMe: false, isGroup: false },
      timestamp: 1_700_000_000_000,
      chat: ANA,
      at: AT,
      ...over,
    });
    const heldRows = () =>
      testStore.store.db
        .selectFrom('held_receipts')
        .select(['message_id', 'state', 'sender'])
        .where('instance_id', '=', instanceId)
        .orderBy('message_id')
        .orderBy('state')
        .execute();

    it('holds a receipt for a pending or sending job of its chat only; stored messages move as before', async () => {
      const db = testStore.store.db;
      await job('H1');
      await job('H2', ANA, true);
      await job('H3', BIA);
      await insertMessages(
        db,
        instanceId,
        [
          {
            message: {
              id: 'H4',
              source: { chat: ANA, sender: '5511999990000@s.whatsapp.net', isFromMe: true, isGroup: false },
              pushName: '',
              timestamp: 1_000,
              content: { kind: 'text', text: 'stored' },
            },
            state: 'sent',
          },
        ],
        AT,
      );
      const held = await advanceOrHoldReceipt(db, instanceId, receipt(['H1', 'H2', 'H3', 'H4', 'unknown']));
      assert.deepEqual([...held].sort(), ['H1', 'H2']);
      const stored = await db
        .selectFrom('messages')
        .select('state')
        .where('id', '=', 'H4')
        .executeTakeFirst();
      assert.equal(stored?.state, 'read');
      // The same receipt again is held once, and still answered held (its copy is not reported either).
      assert.deepEqual([...(await advanceOrHoldReceipt(db, instanceId, receipt(['H1'])))], ['H1']);
      await advanceOrHoldReceipt(db, instanceId, receipt(['H1'], { state: 'delivered' }));
      assert.deepEqual(await heldRows(), [
        { message_id: 'H1', state: 'delivered', sender: ANA },
        { message_id: 'H1', state: 'read', sender: ANA },
        { message_id: 'H2', state: 'read', sender: ANA },
      ]);
    });

    it('a job sent to a LID parley keeps for the receipt’s number counts as the same chat', async () => {
      const db = testStore.store.db;
      await upsertLidMappings(db, instanceId, [{ lid: '123456', phone: '5511988887777' }], 1_000);
      await job('L1', '123456@lid');
      await job('L2', '654321@lid');
      const held = await advanceOrHoldReceipt(db, instanceId, receipt(['L1', 'L2']));
      assert.deepEqual([...held], ['L1']);
    });

    it('the mark of a sent job says whether receipts are held; the riding forms leave such a job unmarked', async () => {
      const db = testStore.store.db;
      await job('M1');
      await job('M2');
      await advanceOrHoldReceipt(db, instanceId, receipt(['M1']));
      const marked = await markSendJobsSent(db, instanceId, ['M1', 'M2'], 2_000);
      assert.deepEqual(Object.fromEntries(marked), {
        M1: { mode: 'sync', held: true },
        M2: { mode: 'sync', held: false },
      });
      await job('M3');
      await job('M4');
      await advanceOrHoldReceipt(db, instanceId, receipt(['M3']));
      const unlessHeld = await markSendJobsSent(db, instanceId, ['M3', 'M4'], 2_000, true);
      assert.deepEqual([...unlessHeld.keys()], ['M4']);
      if (dialect === 'postgres') {
        await job('M5');
        await advanceOrHoldReceipt(db, instanceId, receipt(['M5']));
        let answered: string[] = [];
        await db.transaction().execute((trx) =>
          advanceMarking(trx, instanceId, 1, {
            instanceId,
            ids: ['M5'],
            at: 2_000,
            answer: (ids) => {
              answered = [...ids];
            },
          }),
        );
        assert.deepEqual(answered, [], 'the advance leaves the job to its relay’s finish');
      }
      const left = await db
        .selectFrom('send_jobs')
        .select(['id', 'status'])
        .where('id', 'in', ['M3', 'M5'])
        .orderBy('id')
        .execute();
      assert.deepEqual(
        left.map((row) => row.status),
        left.map(() => 'sending'),
      );
      // Its relay's finish says so too.
      assert.deepEqual(
        await finishSendJob(db, instanceId, 'M3', 'node-1', { status: 'sent', at: 3_000, newChat: false }),
        {
          held: true,
        },
      );
      assert.deepEqual(
        await finishSendJob(db, instanceId, 'M3', 'node-1', { status: 'sent', at: 3_000, newChat: false }),
        undefined,
      );
    });

    it('held receipts are taken back once, in the order of the ids, then of state; they go with their job', async () => {
      const db = testStore.store.db;
      await job('T1');
      await job('T2');
      const source = { chat: ANA, sender: ANA, isFromMe: false, isGroup: false };
      await advanceOrHoldReceipt(db, instanceId, receipt(['T1', 'T2'], { state: 'played', timestamp: 3 }));
      await advanceOrHoldReceipt(db, instanceId, receipt(['T2'], { state: 'delivered', timestamp: 1 }));
      assert.deepEqual(await takeHeldReceipts(db, instanceId, ['T2', 'T1']), [
        { type: 'receipt', state: 'delivered', messageIds: ['T2'], source, timestamp: 1 },
        { type: 'receipt', state: 'played', messageIds: ['T2'], source, timestamp: 3 },
        { type: 'receipt', state: 'played', messageIds: ['T1'], source, timestamp: 3 },
      ]);
      assert.deepEqual(await takeHeldReceipts(db, instanceId, ['T1', 'T2']), []);
      await job('T3');
      await advanceOrHoldReceipt(db, instanceId, receipt(['T3']));
      await db.deleteFrom('send_jobs').where('instance_id', '=', instanceId).where('id', '=', 'T3').execute();
      assert.deepEqual(
        (await heldRows()).filter((row) => row.message_id === 'T3'),
        [],
      );
    });
  });
}
