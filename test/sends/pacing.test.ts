/**
 * The pace of an instance's sends (docs/decisions/0013-pacing.md), as the send queue keeps it:
 * - `minIntervalMs` holds the synchronous sends a restriction pause lets through, as at any other time (they went
 *   out back to back exactly while the platform said "too fast");
 * - a synchronous send never overtakes a queued one accepted before it, even with no pace set (it was relayed at
 *   once while the queue's last job was still being relayed, and could finish first);
 * - a new pace counts from the last relay: a longer interval set just after a relay holds the next one (it let the
 *   next job go at once), a shorter one lets it go sooner;
 * - a new-chats cap counts the chats opened in the last 24 h before it was set (those relays were not flagged, so an
 *   instance could open the whole cap again at once), also one whose relay was under way when it was set.
 * Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import type { OutgoingMessage } from '../../src/domain/messages.ts';
import type { EngineSession } from '../../src/engines/engine.ts';
import { encodeSendPayload } from '../../src/sends/payload.ts';
import type { SendQueue } from '../../src/sends/queue.ts';
import { SLOT_WAIT } from '../../src/store/send-job-slots.ts';
import { insertSendJob, type NewSendJob } from '../../src/store/send-jobs.ts';
import { createTestApp, type TestApp } from '../support/app.ts';
import { eventually } from '../support/eventually.ts';
import { testDialects } from '../support/store.ts';
import { fakeSession, settledFlag, testQueue, textJob, untilRelayedAtOnce } from './support.ts';

const T0 = Date.parse('2026-04-01T08:00:00.000Z');
const DAY = 86_400_000;
const PACE = { minIntervalMs: 60_000, jitterMs: 0, newChatsPerDay: null };

/**
 * Time for a relay that should not happen to happen if it would: the queue's next pass is a few statements and one
 * turn of the event loop away. Only used to see that nothing more happens; every positive wait uses `eventually`.
 */
const aWhile = () => new Promise((resolve) => setTimeout(resolve, 100));

for (const dialect of testDialects()) {
  describe(`pacing: the send queue keeps the pace [${dialect}]`, () => {
    let t: TestApp;
    const queues: SendQueue[] = [];
    before(async () => {
      t = await createTestApp({ dialect });
    });
    after(async () => {
      for (const queue of queues) await queue.stop();
      await t.close();
    });

    /**
     * A new queue for the test instance (a fresh process: nothing relayed, nothing known) over a session relaying
     * through `send`. The instance's earlier jobs are gone and its pace is off.
     */
    const startQueue = async (send: (message: OutgoingMessage) => Promise<void>) => {
      for (const queue of queues.splice(0)) await queue.stop();
      const { db } = t.services.store;
      await db.deleteFrom('send_jobs').where('instance_id', '=', t.instance.id).execute();
      await db.deleteFrom('messages').where('instance_id', '=', t.instance.id).execute();
      await db.deleteFrom('send_pacing').where('instance_id', '=', t.instance.id).execute();
      t.clock.set(T0);
      const session = fakeSession(async (message) => {
        await send(message);
        return { id: message.id ?? '', timestamp: t.clock() };
      });
      const queue = testQueue(t.clock, db, t.instance.id, session);
      queues.push(queue);
      return { queue, session };
    };
    const status = async (id: string) =>
      await t.services.store.db
        .selectFrom('send_jobs')
        .select(['status', 'run_at', 'new_chat'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    const job = (id: string, mode: 'sync' | 'async') => textJob(t.instance.id, id, mode, t.clock());
    /** Stores a synchronous send and starts its wait: `answer`, its rejection marked handled. */
    const sendSync = async (queue: SendQueue, session: EngineSession, id: string) => {
      const answer = (await queue.storeSync(session, job(id, 'sync')))();
      answer.catch(() => undefined);
      return { answer };
    };

    it('minIntervalMs holds the synchronous sends a restriction pause lets through', async () => {
      const relayed: [string, number][] = [];
      let refuse: DomainError | undefined;
      const { queue, session } = await startQueue(async (message) => {
        const error = refuse;
        refuse = undefined;
        if (error) throw error;
        relayed.push([message.id ?? '', t.clock() - T0]);
      });
      await queue.setPacing(t.instance.id, PACE);
      await (await sendSync(queue, session, 'PAUSE-S1')).answer;
      // The pace holds the next one for 60 s; then the platform answers it "too fast": the queue pauses 10 min.
      const { answer: refused } = await sendSync(queue, session, 'PAUSE-S2');
      t.clock.advance(60_000);
      refuse = new DomainError('rate_limited', 'the platform rate-limited this account', { retryAfter: 600 });
      queue.wake(t.instance.id);
      await assert.rejects(refused, (error: DomainError) => error.code === 'rate_limited');
      // The request hears the refusal before the pause is written.
      assert.deepEqual(
        await eventually('the pause', async () => (await queue.pause(t.instance.id)) ?? undefined),
        {
          reason: 'the platform rate-limited this account',
          until: T0 + 660_000,
        },
      );
      // Two synchronous sends during the pause: relayed to hear the platform's verdict, but one per 60 s.
      const { answer: third } = await sendSync(queue, session, 'PAUSE-S3');
      const { answer: fourth } = await sendSync(queue, session, 'PAUSE-S4');
      await third;
      await aWhile();
      assert.deepEqual(relayed, [
        ['PAUSE-S1', 0],
        ['PAUSE-S3', 60_000],
      ]);
      assert.equal(
        (await status('PAUSE-S4')).status,
        'pending',
        'held by the pace, the pause still in force',
      );
      t.clock.advance(60_000);
      queue.wake(t.instance.id);
      await fourth;
      assert.deepEqual(relayed, [
        ['PAUSE-S1', 0],
        ['PAUSE-S3', 60_000],
        ['PAUSE-S4', 120_000],
      ]);
    });

    it('a synchronous send waits for a queued one accepted before it, still being relayed, with no pace set', async () => {
      const started: string[] = [];
      const finished: string[] = [];
      let release: () => void = () => undefined;
      const upload = new Promise<void>((resolve) => {
        release = resolve;
      });
      const { queue, session } = await startQueue(async (message) => {
        const id = message.id ?? '';
        started.push(id);
        // A queued image whose upload takes a while.
        if (id === 'ORDER-Q-IMAGE') await upload;
        finished.push(id);
      });
      // Once the queue drained, a synchronous send is stored claimed and relayed at once.
      await untilRelayedAtOnce(queue, session, t.services.store.db, t.instance.id, t.clock, 'ORDER-WARM-UP');
      await insertSendJob(t.services.store.db, job('ORDER-Q-IMAGE', 'async'));
      queue.submitted(t.instance.id);
      await eventually('the queued image on its way', () => started.includes('ORDER-Q-IMAGE'));
      const { answer: text } = await sendSync(queue, session, 'ORDER-S-TEXT');
      const answered = settledFlag(text);
      assert.equal(
        (await status('ORDER-S-TEXT')).status,
        'pending',
        'stored for its turn, not claimed at once',
      );
      await aWhile();
      assert.equal(answered(), false);
      assert.deepEqual(started.slice(-1), ['ORDER-Q-IMAGE'], 'the text waits for the image');
      release();
      await text;
      assert.deepEqual(finished.slice(-2), ['ORDER-Q-IMAGE', 'ORDER-S-TEXT']);
    });

    it('a new pace counts from the last relay: a longer interval holds the next one, a shorter lets it go', async () => {
      const relayed: [string, number][] = [];
      const { queue } = await startQueue(async (message) => {
        relayed.push([message.id ?? '', t.clock() - T0]);
      });
      await queue.setPacing(t.instance.id, PACE);
      for (const id of ['REPACE-P1', 'REPACE-P2']) await insertSendJob(t.services.store.db, job(id, 'async'));
      queue.wake(t.instance.id);
      await eventually('the first relay', () => relayed.length === 1);
      t.clock.advance(1_000);
      await queue.setPacing(t.instance.id, { ...PACE, minIntervalMs: 600_000 });
      await aWhile();
      t.clock.set(T0 + 60_000);
      queue.wake(t.instance.id);
      await aWhile();
      assert.deepEqual(relayed, [['REPACE-P1', 0]], 'the 10 min interval counts from the first relay');
      // Shorter again: 30 s after the first relay have passed, so the next goes now.
      await queue.setPacing(t.instance.id, { ...PACE, minIntervalMs: 30_000 });
      await eventually('the second relay', () => relayed.length === 2);
      assert.deepEqual(relayed, [
        ['REPACE-P1', 0],
        ['REPACE-P2', 60_000],
      ]);
    });

    it('a new-chats cap set later counts the chats opened in the last 24 h before it', async () => {
      const { db } = t.services.store;
      /** Holds the relay of job `id` (`entered` once it began) until `release` resolves. */
      let hold: { id: string; entered: boolean; release: Promise<void> } | undefined;
      const relayed: string[] = [];
      /** A message row of the instance in `chat` at `timestamp`, as the recorder stores one. */
      const messageRow = (id: string, chat: string, fromMe: boolean, timestamp: number) =>
        db
          .insertInto('messages')
          .values({
            instance_id: t.instance.id,
            id,
            chat,
            sender: fromMe ? '' : chat,
            from_me: fromMe ? 1 : 0,
            is_group: chat.endsWith('@g.us') ? 1 : 0,
            type: 'text',
            content: JSON.stringify({ kind: 'text', text: id }),
            push_name: '',
            timestamp,
            state: fromMe ? 'sent' : 'delivered',
            state_at: timestamp,
            created_at: timestamp,
          })
          .execute();
      const { queue } = await startQueue(async (message) => {
        const id = message.id ?? '';
        if (hold?.id === id) {
          hold.entered = true;
          await hold.release;
        }
        relayed.push(id);
        // A recording engine stores the sent message, with the platform's time in whole seconds.
        await messageRow(id, message.to, true, Math.floor(t.clock() / 1000) * 1000);
      });
      const to = (id: string, chat: string): NewSendJob => ({
        ...job(id, 'async'),
        chat,
        payload: encodeSendPayload({ to: chat, content: { kind: 'text', text: id, linkPreview: false } }),
      });
      const chat = (n: number) => `55119777700${String(n).padStart(2, '0')}@s.whatsapp.net`;
      const relay = async (...jobs: NewSendJob[]) => {
        for (const each of jobs) await insertSendJob(db, each);
        queue.wake(t.instance.id);
        await eventually('the relays', async () => {
          for (const each of jobs) if ((await status(each.id)).status !== 'sent') return false;
          return true;
        });
      };
      /** Job `id`'s status and `run_at` once the queue decided on it: relayed, or held from `runAt`. */
      const decided = (id: string, runAt: number) =>
        eventually(`the queue's decision on ${id}`, async () => {
          const row = await status(id);
          const at = Number(row.run_at);
          const undecided = row.status === 'sending' || (row.status === 'pending' && at === runAt);
          return undecided ? undefined : { status: row.status, runAt: at };
        });
      // A chat with history: a message received an hour before.
      await messageRow('CAP-RECEIVED', chat(1), false, T0 - 3_600_000);
      // Opened more than a day before: outside the window.
      t.clock.set(T0 - DAY - 60_000);
      await relay(to('CAP-OLD', chat(2)));
      t.clock.set(T0);
      // No cap yet: chat 3 opened (and written to again in the same ms), chat 4 opened, chat 1 known, a group.
      await relay(
        to('CAP-OPENS-3', chat(3)),
        to('CAP-AGAIN-3', chat(3)),
        to('CAP-KNOWN-1', chat(1)),
        to('CAP-GROUP', '120363000000000001@g.us'),
      );
      t.clock.advance(500);
      await relay(to('CAP-OPENS-4', chat(4)));
      t.clock.advance(60_000);
      await queue.setPacing(t.instance.id, { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: 2 });
      const flags = async (ids: string[]) =>
        Object.fromEntries(await Promise.all(ids.map(async (id) => [id, (await status(id)).new_chat])));
      assert.deepEqual(
        await flags(['CAP-OLD', 'CAP-OPENS-3', 'CAP-AGAIN-3', 'CAP-KNOWN-1', 'CAP-GROUP', 'CAP-OPENS-4']),
        {
          'CAP-OLD': 0,
          'CAP-OPENS-3': 1,
          'CAP-AGAIN-3': 0,
          'CAP-KNOWN-1': 0,
          'CAP-GROUP': 0,
          'CAP-OPENS-4': 1,
        },
        'the chats opened in the last 24 h are counted',
      );
      // Two opened today: a third new chat waits until the window no longer counts the first of them (its time + 24 h
      // + 1 ms); a known chat goes on.
      await insertSendJob(db, to('CAP-NEW-5', chat(5)));
      await relay(to('CAP-KNOWN-AGAIN', chat(1)));
      // It waits for a slot, its place the time the slot frees (src/store/send-job-slots.ts).
      assert.deepEqual(await decided('CAP-NEW-5', T0 + 60_500), {
        status: 'pending',
        runAt: SLOT_WAIT + T0 + DAY + 1,
      });
      assert.equal(relayed.includes('CAP-NEW-5'), false);

      // A relay under way while the cap is set is counted too, at the first check under the cap.
      await queue.setPacing(t.instance.id, { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: null });
      await db.deleteFrom('send_jobs').where('id', '=', 'CAP-NEW-5').execute();
      t.clock.set(T0 + 2 * DAY);
      let release: () => void = () => undefined;
      hold = {
        id: 'CAP-UNDER-WAY',
        entered: false,
        release: new Promise<void>((resolve) => {
          release = resolve;
        }),
      };
      await insertSendJob(db, to('CAP-UNDER-WAY', chat(6)));
      await insertSendJob(db, to('CAP-AFTER', chat(7)));
      queue.wake(t.instance.id);
      await eventually('the relay under way', () => hold?.entered);
      await queue.setPacing(t.instance.id, { minIntervalMs: 0, jitterMs: 0, newChatsPerDay: 1 });
      release();
      assert.deepEqual(await decided('CAP-AFTER', T0 + 2 * DAY), {
        status: 'pending',
        runAt: SLOT_WAIT + T0 + 3 * DAY + 1,
      });
      assert.deepEqual(await flags(['CAP-UNDER-WAY', 'CAP-AFTER']), { 'CAP-UNDER-WAY': 1, 'CAP-AFTER': 0 });
      assert.equal(relayed.includes('CAP-AFTER'), false);
    });
  });
}
