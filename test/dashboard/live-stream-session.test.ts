import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestApp, type TestApp } from '../support/app.ts';
import { sseReader } from '../support/sse.ts';
import { createUser, type DashboardClient, signIn } from './support.ts';

/**
 * The dashboard's live stream of an instance lives as long as the session that opened it (docs/dashboard.md): once
 * the session ends (sign-out, the user removed) the stream ends before it writes anything more, so a removed user
 * gets no status and no QR code of a later pairing.
 */
describe('dashboard live stream: ends with its session', () => {
  let t: TestApp;
  let url: string;
  let owner: DashboardClient;
  before(async () => {
    t = await createTestApp({ dialect: 'sqlite' });
    url = await t.app.listen({ host: '127.0.0.1', port: 0 });
    owner = await signIn(t, await createUser(t, 'owner'));
  });
  after(() => t.close());

  /** The live stream of the app's instance opened with `client`'s session, past its first status and QR events. */
  async function openStream(client: DashboardClient) {
    const response = await fetch(`${url}/dashboard/api/instances/${t.instance.id}/events`, {
      headers: { cookie: client.cookie },
    });
    assert.equal(response.status, 200);
    assert.ok(response.body);
    const stream = sseReader(response.body);
    await stream.next('status');
    await stream.next('qr');
    return stream;
  }

  /** After a connect by the owner: the stream must end, not hand out the new pairing's QR code. */
  async function endsBeforeAQrCode(stream: ReturnType<typeof sseReader>): Promise<void> {
    const connect = await owner.call('POST', `/instances/${t.instance.id}/connect`);
    assert.equal(connect.status, 200);
    await assert.rejects(
      stream.next('qr', (data) => data !== null),
      /stream ended/,
      'a QR code reached a session that had ended',
    );
  }

  it('a removed user’s open stream ends and gets no QR code of a later connect', {
    timeout: 30_000,
  }, async () => {
    // A member: a viewer is never sent a QR code (docs/decisions/0022-dashboard.md), removed or not.
    const email = await createUser(t, 'member');
    const member = await signIn(t, email);
    const stream = await openStream(member);
    try {
      const users = (await owner.call('GET', '/users')).body.data.users as { id: string; email: string }[];
      const id = users.find((user) => user.email === email)?.id;
      assert.ok(id);
      assert.equal((await owner.call('DELETE', `/users/${id}`)).status, 200);
      assert.equal((await member.call('GET', '/me')).status, 401, 'the session is gone');
      await endsBeforeAQrCode(stream);
    } finally {
      await stream.cancel().catch(() => undefined);
      await owner.call('POST', `/instances/${t.instance.id}/disconnect`);
    }
  });

  it('a signed-out session’s open stream ends', { timeout: 30_000 }, async () => {
    const member = await signIn(t, await createUser(t, 'member'));
    const stream = await openStream(member);
    try {
      assert.equal((await member.call('POST', '/sign-out')).status, 200);
      await endsBeforeAQrCode(stream);
    } finally {
      await stream.cancel().catch(() => undefined);
      await owner.call('POST', `/instances/${t.instance.id}/disconnect`);
    }
  });
});
