import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { main } from '../../src/cli/main.ts';
import { parseApiKey } from '../../src/security/api-keys.ts';

describe('admin CLI (docs/cli.md)', () => {
  let dataDir: string;
  const env = () => ({ DATA_DIR: dataDir, LOG_LEVEL: 'silent' });
  async function run(...args: string[]) {
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(['node', 'parley', ...args], {
      out: (s) => out.push(s),
      err: (s) => err.push(s),
      env: env(),
    });
    return { code, out, err, json: out.length === 1 ? JSON.parse(out[0] ?? '') : undefined };
  }

  before(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'parley-cli-'));
  });
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  it('creates an org, an instance and a key, each printing exactly one JSON object with --json', async () => {
    const org = await run(
      '--init',
      'org',
      'create',
      '--name',
      'acme',
      '--plan',
      'enterprise',
      '--per-minute',
      '120',
      '--per-day',
      '5000',
      '--json',
    );
    assert.equal(org.code, 0);
    assert.equal(org.out.length, 1);
    assert.deepEqual(Object.keys(org.json).sort(), [
      'id',
      'maxInstances',
      'name',
      'perDay',
      'perMinute',
      'plan',
    ]);
    assert.deepEqual(
      { ...org.json, id: 'x' },
      { id: 'x', name: 'acme', plan: 'enterprise', perMinute: 120, perDay: 5000, maxInstances: null },
    );

    const instance = await run(
      'instance',
      'create',
      '--org',
      'acme',
      '--env',
      'live',
      '--name',
      'sales',
      '--json',
    );
    assert.deepEqual(
      { ...instance.json, id: 'x' },
      { id: 'x', orgId: org.json.id, env: 'live', name: 'sales' },
    );

    const key = await run(
      'key',
      'create',
      '--org',
      org.json.id,
      '--env',
      'live',
      '--name',
      'backend',
      '--scopes',
      'chat:messages,chat:contacts',
      '--instances',
      instance.json.id,
      '--expires-in',
      '30d',
      '--json',
    );
    assert.equal(key.code, 0);
    assert.deepEqual(Object.keys(key.json).sort(), [
      'env',
      'expiresAt',
      'id',
      'instances',
      'key',
      'prefix',
      'scopes',
    ]);
    assert.deepEqual(parseApiKey(key.json.key), { env: 'live' });
    assert.equal(key.json.prefix, key.json.key.slice(0, 12));
    assert.deepEqual(key.json.scopes, ['chat:messages', 'chat:contacts']);
    assert.deepEqual(key.json.instances, [instance.json.id]);
    const days = (Date.parse(key.json.expiresAt) - Date.now()) / 86_400_000;
    assert.ok(days > 29.99 && days <= 30, `expires in ${days} days`);

    const list = await run('key', 'list', '--org', 'acme', '--json');
    assert.equal(list.json.keys.length, 1);
    assert.ok(!JSON.stringify(list.json).includes(key.json.key), 'the key value is never listed');

    const revoked = await run('key', 'revoke', key.json.id, '--json');
    assert.deepEqual(Object.keys(revoked.json).sort(), ['id', 'revokedAt']);
    assert.match(revoked.json.revokedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    const instances = await run('instance', 'list', '--org', 'acme', '--json');
    assert.equal(instances.json.instances[0].id, instance.json.id);
  });

  it('answers bad input with one JSON error object and a non-zero exit', async () => {
    const cases: [string[], RegExp][] = [
      [['org', 'create', '--name', 'acme', '--json'], /already exists/],
      [
        ['org', 'create', '--name', 'x', '--plan', 'gold', '--json'],
        /--plan must be one of free, pro, enterprise/,
      ],
      [
        ['org', 'create', '--name', 'y', '--per-minute', '10', '--json'],
        /--per-minute applies to the enterprise plan only/,
      ],
      [
        ['instance', 'create', '--org', 'nobody', '--env', 'test', '--json'],
        /organization "nobody" not found/,
      ],
      [['instance', 'create', '--org', 'acme', '--env', 'prod', '--json'], /--env must be test or live/],
      [
        ['key', 'create', '--org', 'acme', '--env', 'test', '--scopes', 'chat:all', '--json'],
        /unknown scope chat:all/,
      ],
      [
        ['key', 'create', '--org', 'acme', '--env', 'test', '--expires-in', '3 weeks', '--json'],
        /--expires-in must be a duration/,
      ],
      [['key', 'revoke', 'nope', '--json'], /key nope not found/],
    ];
    for (const [args, pattern] of cases) {
      const result = await run(...args);
      assert.equal(result.code, 1, args.join(' '));
      assert.equal(result.out.length, 1);
      assert.match(result.json.error, pattern);
    }
    const usage = await run('org', 'create', '--json');
    assert.equal(usage.code, 2);
    assert.match(usage.json.error, /--name/);
  });

  it('runs as `npx parley` from the project root', () => {
    const result = spawnSync(
      'npx',
      ['--no-install', 'parley', 'org', 'create', '--name', 'npx-org', '--json'],
      {
        env: { ...process.env, ...env() },
        encoding: 'utf8',
      },
    );
    assert.equal(result.status, 0, result.stderr);
    assert.equal(JSON.parse(result.stdout.trim()).name, 'npx-org');
  });
});
