import { test } from 'node:test';
import pg from 'pg';
import { createTestApp, loginSandbox } from '../test/support/app.ts';

test('freeze', async () => {
  const t = await createTestApp({ dialect: 'postgres' });
  await loginSandbox(t);
  const r0 = await t.call('POST', '/v1/messages/send', { phone: '5511988887777', body: 'before' });
  console.log('before', r0.status);
  // Every client that exists now goes silent: its socket stops reading (the server's answers never arrive).
  const frozen = new Set<object>();
  const query = pg.Client.prototype.query;
  (pg.Client.prototype as any).query = function (this: any, ...args: unknown[]) {
    if (!frozen.has(this)) { frozen.add(this); this.connection.stream.pause(); console.log('froze a client'); }
    return (query as any).apply(this, args);
  };
  const started = Date.now();
  const r1 = await Promise.race([
    t.call('POST', '/v1/messages/send', { phone: '5511988887777', body: 'during' }),
    new Promise<{ status: string }>((r) => setTimeout(() => r({ status: 'no answer in 60 s' }), 60_000)),
  ]);
  console.log('during', r1.status, Date.now() - started, 'ms', JSON.stringify((r1 as any).body ?? {}));
  pg.Client.prototype.query = query;
  const started2 = Date.now();
  const r2 = await Promise.race([
    t.call('POST', '/v1/messages/send', { phone: '5511988887777', body: 'after' }),
    new Promise<{ status: string }>((r) => setTimeout(() => r({ status: 'no answer in 30 s' }), 30_000)),
  ]);
  console.log('after', r2.status, Date.now() - started2, 'ms');
  process.exit(0);
});
