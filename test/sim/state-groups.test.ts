/**
 * Groups across a simulator restart with a state directory: members, roles, invite code and settings come back,
 * and a state file whose group names someone who is no user is a clear error.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { StateError } from '../../sim/model/state.ts';
import { startSimulator } from '../../sim/simulator.ts';
import { control } from './support.ts';

const dirs: string[] = [];
function stateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'parley-sim-groups-'));
  dirs.push(dir);
  return dir;
}
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('simulator groups across a restart with --state-dir', () => {
  it('keeps every group with its members, roles, invite code and settings', async () => {
    const dir = stateDir();
    const first = await startSimulator({ stateDir: dir });
    for (const phone of ['5511940000201', '5511940000202', '5511940000203'])
      assert.equal((await control(first, 'POST', '/users', { phone })).status, 201);
    const created = await control(first, 'POST', '/groups', {
      creator: '5511940000201',
      subject: 'Kept',
      participants: ['5511940000202', '5511940000203'],
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const jid = (created.body as { jid: string }).jid;
    const promoted = await control(first, 'POST', `/groups/${jid}/participants`, {
      actor: '5511940000201',
      action: 'promote',
      participants: ['5511940000202'],
    });
    assert.ok(promoted.status < 300, JSON.stringify(promoted.body));
    const before = (await control(first, 'GET', `/groups/${jid}`)).body;
    await first.close();

    const second = await startSimulator({ stateDir: dir });
    try {
      const after = await control(second, 'GET', `/groups/${jid}`);
      assert.equal(after.status, 200);
      assert.deepEqual(after.body, before);
      assert.deepEqual(
        (after.body as { participants: { phone: string; role: string }[] }).participants.map((p) => [
          p.phone,
          p.role,
        ]),
        [
          ['5511940000201', 'superadmin'],
          ['5511940000202', 'admin'],
          ['5511940000203', 'member'],
        ],
      );
    } finally {
      await second.close();
    }
  });

  it('a group naming someone who is no user: the simulator refuses to start and says so', async () => {
    const dir = stateDir();
    const first = await startSimulator({ stateDir: dir });
    await control(first, 'POST', '/users', { phone: '5511940000211' });
    await control(first, 'POST', '/users', { phone: '5511940000212' });
    await control(first, 'POST', '/groups', {
      creator: '5511940000211',
      subject: 'Broken',
      participants: ['5511940000212'],
    });
    await first.close();
    const path = join(dir, 'state.json');
    writeFileSync(
      path,
      readFileSync(path, 'utf8').replace('["5511940000212","member"]', '["5511940000299","member"]'),
    );
    await assert.rejects(startSimulator({ stateDir: dir }), (error: unknown) => {
      assert.ok(error instanceof StateError);
      assert.match(
        error.message,
        /has a group that cannot be restored \(group .* names 5511940000299, who is no user\)/,
      );
      return true;
    });
  });
});
