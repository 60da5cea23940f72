/**
 * The simulated platform keeps a change only with its event (docs/decisions/0024-engines-and-data-flow.md: the
 * sandbox's relay is its recording). A store that refuses the event's row (a permanent error, injected through the
 * store's test-only fault hook) fails the call and leaves the simulated world as it was, so the same call made again
 * changes it and records the event. Kept before its event, a login, a connect, a member's join, the account's leave or
 * a call's reject stayed made with no event, and the call made again was refused (already logged in, already a
 * participant, not in the group, no longer ringing) or did nothing (a connect): the receiver was never told, and a
 * login's instance stayed unlinked. Runs on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { SandboxLabelsState } from '../../src/engines/sandbox/labels.ts';
import { appFor, bad, OWN, PEER } from '../messages/support.ts';
import { loginSandbox, type TestApp } from '../support/app.ts';
import {
  checkViolation,
  createTestStore,
  type TestDialect,
  type TestStore,
  testDialects,
} from '../support/store.ts';

const T0 = Date.parse('2026-03-02T10:00:00.000Z');
const OWN_JID = `${OWN}@s.whatsapp.net`;
const ANA = '5511988887777';
const BIA = '5511966665555';
const jidOf = (phone: string) => `${phone}@s.whatsapp.net`;

/**
 * A test app over a store that refuses every event row (a `webhook_events` insert, or one into `options.table`: the
 * table an event without a webhook is recorded in) while `refusing` runs its call, with its readers.
 */
function refusingApp(dialect: TestDialect, options: { login: boolean; table?: string }) {
  const table = options.table ?? 'webhook_events';
  let testStore: TestStore;
  const app: { t?: TestApp } = {};
  /** While true, every statement writing an event row fails. */
  let failing = false;
  let refused = 0;
  const t = (): TestApp => {
    assert.ok(app.t, 'the app is up');
    return app.t;
  };
  /** The `event` objects of the instance's stored webhook events of `type`, in sequence order. */
  const events = async (type: string) =>
    (
      await t()
        .services.store.db.selectFrom('webhook_events')
        .select(['payload'])
        .where('instance_id', '=', t().instance.id)
        .where('type', '=', type)
        .orderBy('sequence')
        .execute()
    ).map((row) => JSON.parse(row.payload).event);
  /** `call` with every event row refused; asserts one was. */
  const refusing = async <T>(call: () => Promise<T>): Promise<T> => {
    const before = refused;
    failing = true;
    try {
      return await call();
    } finally {
      failing = false;
      assert.ok(refused > before, 'an event row was refused');
    }
  };
  before(async () => {
    testStore = await createTestStore(dialect, {
      faults: (sql) => {
        if (failing && sql.toLowerCase().startsWith(`insert into "${table}"`)) {
          refused += 1;
          throw checkViolation(table);
        }
      },
    });
    app.t = await appFor(dialect, { testStore });
    app.t.clock.set(T0);
    if (options.login) await loginSandbox(app.t, OWN);
  });
  after(async () => {
    await app.t?.close();
    await testStore.cleanup();
  });
  return { t, events, refusing };
}

for (const dialect of testDialects()) {
  describe(`the sandbox keeps a login only with its event [${dialect}]`, () => {
    const { t: app, events, refusing } = refusingApp(dialect, { login: false });

    it('a login whose event is refused leaves the account unlinked; the scan made again links it with its event', async () => {
      const connect = await app().call('POST', '/v1/session/connect', {});
      assert.equal(connect.status, 200, JSON.stringify(connect.body));
      const scan = () => app().call('POST', '/v1/sandbox/scan', { phone: OWN });
      const linked = async () =>
        (
          await app()
            .services.store.db.selectFrom('instances')
            .select(['jid'])
            .where('id', '=', app().instance.id)
            .executeTakeFirstOrThrow()
        ).jid;
      const statuses = async () => (await events('SessionStatus')).map((e) => e.status);
      const before = await statuses();

      const first = await refusing(scan);
      assert.equal(first.status, 500, JSON.stringify(first.body));
      assert.equal(await linked(), null);
      assert.deepEqual(await statuses(), before);

      const again = await scan();
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.equal(await linked(), `${OWN}.0:1@s.whatsapp.net`);
      assert.deepEqual((await statuses()).slice(before.length), ['connected']);
    });
  });

  describe(`the sandbox keeps a connection or a change of its world only with its event [${dialect}]`, () => {
    const { t: app, events, refusing } = refusingApp(dialect, { login: true });
    const participants = async (groupJid: string) => {
      const res = await app().call('GET', `/v1/groups/info?groupJid=${encodeURIComponent(groupJid)}`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return (res.body.data.participants as { jid: string }[]).map((p) => p.jid).sort();
    };

    it('a connect whose event is refused leaves the session closed; the connect made again opens it with its event', async () => {
      const disconnect = await app().call('POST', '/v1/session/disconnect');
      assert.equal(disconnect.status, 200, JSON.stringify(disconnect.body));
      const statuses = async () => (await events('SessionStatus')).map((e) => e.status);
      const before = await statuses();
      assert.equal(before.at(-1), 'disconnected');
      const connect = () => app().call('POST', '/v1/session/connect', {});

      const first = await refusing(connect);
      assert.equal(first.status, 500, JSON.stringify(first.body));
      assert.deepEqual(await statuses(), before);

      const again = await connect();
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.deepEqual((await statuses()).slice(before.length), ['connected']);
    });

    it("a member's join whose event is refused leaves the group as it was; the join made again records it", async () => {
      const created = await app().call('POST', '/v1/groups/create', { name: 'Team', participants: [ANA] });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const group: string = created.body.data.jid;
      const join = () =>
        app().call('POST', '/v1/sandbox/groups/participants', {
          groupJid: group,
          phone: BIA,
          action: 'join',
        });

      /** The group's stored row of the simulated world (its sealed value and when it was written). */
      const stored = () =>
        app()
          .services.store.db.selectFrom('engine_auth')
          .select(['value', 'updated_at'])
          .where('instance_id', '=', app().instance.id)
          .where('category', '=', 'sandbox-group')
          .where('key_id', '=', group)
          .executeTakeFirstOrThrow();
      const row = await stored();

      const first = await refusing(join);
      assert.equal(first.status, 500, JSON.stringify(first.body));
      assert.deepEqual(await participants(group), [jidOf(ANA), OWN_JID].sort(), 'the join was not kept');
      assert.deepEqual(await events('GroupUpdate'), []);
      // Written in the transaction that records its event, never stored apart from it and written back (each seal
      // of a value differs: a row written again would not be equal)
      // (docs/decisions/0077-state-with-its-events.md).
      assert.deepEqual(await stored(), row, 'the group row was never written');

      const again = await join();
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.deepEqual(await participants(group), [jidOf(ANA), jidOf(BIA), OWN_JID].sort());
      assert.deepEqual(
        (await events('GroupUpdate')).map((e) => [e.action, e.actor, e.participants]),
        [['join', jidOf(BIA), [jidOf(BIA)]]],
      );
    });

    it("the account's leave whose event is refused keeps it in the group; the leave made again records it", async () => {
      const created = await app().call('POST', '/v1/groups/create', { name: 'Short', participants: [ANA] });
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const group: string = created.body.data.jid;
      const before = (await events('GroupUpdate')).length;
      const leave = () => app().call('POST', '/v1/groups/leave', { groupJid: group });

      const first = await refusing(leave);
      assert.equal(first.status, 500, JSON.stringify(first.body));
      assert.deepEqual(await participants(group), [jidOf(ANA), OWN_JID].sort(), 'the leave was not kept');
      assert.equal((await events('GroupUpdate')).length, before);

      const again = await leave();
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.deepEqual(
        (await events('GroupUpdate')).slice(before).map((e) => [e.action, e.actor, e.participants]),
        [['leave', OWN_JID, [OWN_JID]]],
      );
    });

    it('a reject whose event is refused leaves the call ringing; the reject made again records it', async () => {
      const rang = await app().call('POST', '/v1/sandbox/call', { phone: PEER, ring: true });
      assert.equal(rang.status, 200, JSON.stringify(rang.body));
      const id: string = rang.body.data.id;
      const reject = () => app().call('POST', `/v1/calls/${id}/reject`);

      const first = await refusing(reject);
      assert.equal(first.status, 500, JSON.stringify(first.body));
      assert.deepEqual(
        (await events('Call')).map((e) => [e.callId, e.status]),
        [[id, 'offer']],
      );

      const again = await reject();
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.deepEqual(
        (await events('Call')).map((e) => [e.callId, e.status]),
        [
          [id, 'offer'],
          [id, 'rejected'],
        ],
      );
      assert.deepEqual(
        (await reject()).body,
        bad(409, `call ${id} is no longer ringing (rejected)`),
        'rejected once',
      );
    });
  });

  describe(`the sandbox keeps the account's labels only with their events [${dialect}]`, () => {
    const { t: app, refusing } = refusingApp(dialect, { login: true, table: 'labels' });
    /** The account's labels as the simulated platform keeps them (its session's state). */
    const platformLabels = async () => {
      const session = app().services.sessions.ready(app().instance) as unknown as {
        labelsState(): Promise<SandboxLabelsState>;
      };
      return (await session.labelsState()).labels;
    };

    it('a label whose event is refused is neither kept by the platform nor listed; the create made again is', async () => {
      const business = await app().call('POST', '/v1/sandbox/users', {
        phone: OWN,
        verifiedName: 'Acme Shop',
      });
      assert.equal(business.status, 200, JSON.stringify(business.body));
      const create = () => app().call('POST', '/v1/labels', { name: 'VIP' });

      const first = await refusing(create);
      assert.equal(first.status, 500, JSON.stringify(first.body));
      // The session keeps the account's state in memory (a category it owns): what it keeps is what was committed.
      assert.deepEqual(await platformLabels(), {});
      assert.deepEqual((await app().call('GET', '/v1/labels')).body.data, { labels: [] });

      const again = await create();
      assert.equal(again.status, 201, JSON.stringify(again.body));
      assert.deepEqual(again.body.data, { id: '1', name: 'VIP', color: 0, predefinedId: null });
      assert.deepEqual(await platformLabels(), { 1: { id: '1', name: 'VIP', color: 0, predefinedId: null } });
    });
  });

  describe(`the sandbox keeps a login only with the replay of its labels [${dialect}]`, () => {
    const { t: app, events, refusing } = refusingApp(dialect, { login: true, table: 'labels' });

    it("a login whose labels' replay is refused is undone; the scan made again links it with its labels", async () => {
      const business = await app().call('POST', '/v1/sandbox/users', {
        phone: OWN,
        verifiedName: 'Acme Shop',
      });
      assert.equal(business.status, 200, JSON.stringify(business.body));
      const paid = await app().call('POST', '/v1/labels', { name: 'Paid', color: 3 });
      assert.equal(paid.status, 201, JSON.stringify(paid.body));
      assert.equal((await app().call('POST', '/v1/session/logout', {})).status, 200);
      assert.deepEqual(
        (await app().call('GET', '/v1/labels')).body.data,
        { labels: [] },
        'a logout forgets them',
      );
      assert.equal((await app().call('POST', '/v1/session/connect', {})).status, 200);
      const statuses = async () => (await events('SessionStatus')).map((e) => e.status);
      const before = await statuses();
      const scan = () => app().call('POST', '/v1/sandbox/scan', { phone: OWN });

      const first = await refusing(scan);
      assert.equal(first.status, 500, JSON.stringify(first.body));
      // Kept logged in without its labels, the scan made again was refused (409) and the next label made took id 1,
      // overwriting the account's "Paid" (docs/decisions/0045-business-labels.md).
      const status = await app().call('GET', '/v1/session/status');
      assert.equal(status.body.data.loggedIn, false, JSON.stringify(status.body));
      assert.deepEqual(await statuses(), before, 'no status of a login that was undone');

      const again = await scan();
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.deepEqual((await statuses()).slice(before.length), ['connected']);
      const paidLabel = { id: '1', name: 'Paid', color: 3, predefinedId: null };
      assert.deepEqual((await app().call('GET', '/v1/labels')).body.data, { labels: [paidLabel] });
      const next = await app().call('POST', '/v1/labels', { name: 'New customer' });
      assert.equal(next.status, 201, JSON.stringify(next.body));
      assert.equal(next.body.data.id, '2', 'a new label never reuses the id of one the account has');
    });
  });
}
