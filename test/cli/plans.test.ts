import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createTestStore, type TestDialect, testDialects } from '../support/store.ts';
import { type CliResult, cli, organizationRow, storeEnv } from './support.ts';

/**
 * `parley org create|update|list` as a user runs them (docs/decisions/0019-rate-limits-and-plans.md), in a child
 * process against a store reached through the server's settings: enterprise needs both its limits, free and pro
 * refuse limits, and the rows in the store are what the command said. Commands that do not depend on each other run
 * side by side (each run starts a process), and the dialects run concurrently.
 */

/** Asserts each result was refused (exit 1) with an `{"error"}` matching its pattern. */
function assertRefused(results: CliResult[], cases: [string[], RegExp][]) {
  for (const [index, [args, pattern]] of cases.entries()) {
    assert.equal(results[index]?.code, 1, args.join(' '));
    assert.deepEqual(Object.keys(results[index]?.json ?? {}), ['error']);
    assert.match(results[index]?.json.error, pattern, args.join(' '));
  }
}

async function plans(dialect: TestDialect) {
  const testStore = await createTestStore(dialect);
  try {
    const env = storeEnv(testStore);
    const row = (name: string) => organizationRow(testStore, name);

    const refusals: [string[], RegExp][] = [
      [
        ['org', 'create', '--name', 'big', '--plan', 'enterprise'],
        /^--plan enterprise needs its own limits: add --per-minute and --per-day/,
      ],
      [
        ['org', 'create', '--name', 'big', '--plan', 'enterprise', '--per-minute', '100'],
        /^--plan enterprise needs its own limits: add --per-day \(/,
      ],
      [
        ['org', 'create', '--name', 'big', '--plan', 'pro', '--per-day', '100'],
        /^--per-day applies to the enterprise plan only \(pro has fixed limits\)$/,
      ],
      [
        ['org', 'create', '--name', 'big', '--max-instances', '5'],
        /^--max-instances applies to the enterprise plan only \(free has fixed limits\)$/,
      ],
    ];
    const [small, ...refused] = await Promise.all([
      cli(env, 'org', 'create', '--name', 'small', '--json'),
      ...refusals.map(([args]) => cli(env, ...args, '--json')),
    ]);
    assertRefused(refused, refusals);
    assert.equal(await row('big'), undefined, 'no refused org was stored');
    assert.deepEqual(
      { ...small?.json, id: typeof small?.json.id },
      { id: 'string', name: 'small', plan: 'free', perMinute: null, perDay: null, maxInstances: null },
    );

    const created = await cli(
      env,
      ...[
        'org',
        'create',
        '--name',
        'big',
        '--plan',
        'enterprise',
        '--per-minute',
        '100',
        '--per-day',
        '5000',
        '--max-instances',
        '5',
      ],
      '--json',
    );
    assert.equal(created.code, 0, created.stderr);
    const id: string = created.json.id;
    assert.deepEqual(created.json, {
      id,
      name: 'big',
      plan: 'enterprise',
      perMinute: 100,
      perDay: 5000,
      maxInstances: 5,
    });
    assert.deepEqual(await row('big'), {
      name: 'big',
      plan: 'enterprise',
      per_minute: 100,
      per_day: 5000,
      max_instances: 5,
    });

    // One limit changed alone (the other kept), next to updates that are refused and change nothing.
    const badUpdates: [string[], RegExp][] = [
      [
        ['org', 'update', 'big', '--plan', 'pro', '--per-minute', '5'],
        /^--per-minute applies to the enterprise plan only \(pro has fixed limits\)$/,
      ],
      [['org', 'update', 'big', '--plan', 'gold'], /^--plan must be one of free, pro, enterprise$/],
      [
        ['org', 'update', 'big'],
        /^nothing to change: give --plan, --per-minute, --per-day or --max-instances$/,
      ],
      [
        ['org', 'update', 'big', '--max-instances', '0'],
        /^--max-instances must be a positive integer up to 2147483647$/,
      ],
      [['org', 'update', 'nobody', '--plan', 'pro'], /^organization "nobody" not found$/],
      [['org', 'update', 'big', '--per-day', '0'], /^--per-day must be a positive integer up to 2147483647$/],
    ];
    const [oneLimit, ...rejected] = await Promise.all([
      cli(env, 'org', 'update', 'big', '--per-day', '6000', '--json'),
      ...badUpdates.map(([args]) => cli(env, ...args, '--json')),
    ]);
    assertRefused(rejected, badUpdates);
    assert.equal(oneLimit?.code, 0, oneLimit?.stderr);
    assert.deepEqual(oneLimit?.json, {
      id,
      name: 'big',
      plan: 'enterprise',
      perMinute: 100,
      perDay: 6000,
      maxInstances: 5,
    });
    const cap = await cli(env, 'org', 'update', 'big', '--max-instances', '8');
    assert.equal(cap.code, 0, cap.stderr);
    assert.equal(
      cap.stdout,
      `organization big updated: ${id}  big  enterprise 100/min 6000/day 8 instances\n`,
    );
    assert.deepEqual(await row('big'), {
      name: 'big',
      plan: 'enterprise',
      per_minute: 100,
      per_day: 6000,
      max_instances: 8,
    });

    const toPro = await cli(env, 'org', 'update', id, '--plan', 'pro', '--json');
    assert.deepEqual(toPro.json, {
      id,
      name: 'big',
      plan: 'pro',
      perMinute: null,
      perDay: null,
      maxInstances: null,
    });
    assert.deepEqual(await row('big'), {
      name: 'big',
      plan: 'pro',
      per_minute: null,
      per_day: null,
      max_instances: null,
    });

    // From pro no limits are kept: enterprise needs both again.
    const noLimits = await cli(
      env,
      'org',
      'update',
      'big',
      '--plan',
      'enterprise',
      '--per-minute',
      '7',
      '--json',
    );
    assertRefused(
      [noLimits],
      [[['org', 'update'], /^--plan enterprise needs its own limits: add --per-day/]],
    );
    assert.deepEqual(await row('big'), {
      name: 'big',
      plan: 'pro',
      per_minute: null,
      per_day: null,
      max_instances: null,
    });

    const back = await cli(
      env,
      ...['org', 'update', 'big', '--plan', 'enterprise', '--per-minute', '7', '--per-day', '70'],
    );
    assert.equal(back.code, 0, back.stderr);
    assert.equal(back.stdout, `organization big updated: ${id}  big  enterprise 7/min 70/day\n`);

    const list = await cli(env, 'org', 'list', '--json');
    assert.deepEqual(
      list.json.organizations.map((o: Record<string, unknown>) => ({ ...o, id: typeof o.id })),
      [
        { id: 'string', name: 'small', plan: 'free', perMinute: null, perDay: null, maxInstances: null },
        { id: 'string', name: 'big', plan: 'enterprise', perMinute: 7, perDay: 70, maxInstances: null },
      ],
    );
  } finally {
    await testStore.cleanup();
  }
}

describe('parley org plans', { concurrency: true }, () => {
  for (const dialect of testDialects()) {
    it(`creates, updates and lists plans; enterprise needs both limits, free and pro refuse them (${dialect})`, () =>
      plans(dialect));
  }
});
