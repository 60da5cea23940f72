import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig, readCertificateFile } from '../../src/config/config.ts';
import { DEFAULT_POOL_SIZE } from '../../src/store/database.ts';

describe('configuration (docs/decisions/0024-engines-and-data-flow.md)', () => {
  it('applies the defaults', () => {
    const config = loadConfig({});
    assert.equal(config.port, 8080);
    assert.equal(config.host, '0.0.0.0');
    assert.equal(config.dataDir, resolve('./data'));
    assert.deepEqual(config.database, { dialect: 'sqlite', path: resolve('./data/parley.db') });
    assert.equal(config.redisUrl, undefined);
    assert.equal(config.logLevel, 'info');
    assert.equal(config.publicUrl, 'http://localhost:8080');
    assert.deepEqual(
      config.webhook.retryScheduleMs,
      [5000, 300000, 1800000, 7200000, 18000000, 36000000, 36000000],
    );
    assert.equal(config.webhook.timeoutMs, 15000);
    assert.equal(config.shutdownTimeoutMs, 10000);
    assert.equal(config.webhook.claimStaleMs, undefined);
    assert.equal(config.webhook.retentionMs, 30 * 86_400_000);
    assert.deepEqual(config.events, { retentionMs: 7 * 86_400_000 });
    assert.equal(config.ffmpegPath, undefined);
    assert.deepEqual(config.platform, { url: undefined, rootKey: undefined });
    assert.equal(config.cluster, undefined);
  });

  it('reads the cluster settings: a secret of at least 32 characters, a node id, a node URL, the drain grace, the ask bound', () => {
    const secret = 's'.repeat(32);
    assert.deepEqual(loadConfig({ CLUSTER_SECRET: secret }).cluster, {
      secret,
      drainGraceMs: 3000,
      askTimeoutMs: 3000,
    });
    assert.deepEqual(
      loadConfig({
        CLUSTER_SECRET: secret,
        NODE_ID: 'node-1',
        NODE_URL: 'http://10.0.0.1:8080/',
        DRAIN_GRACE_SECONDS: '0.5',
        CLUSTER_ASK_TIMEOUT_SECONDS: '0.25',
      }).cluster,
      { secret, nodeId: 'node-1', nodeUrl: 'http://10.0.0.1:8080', drainGraceMs: 500, askTimeoutMs: 250 },
    );
    assert.throws(
      () => loadConfig({ CLUSTER_SECRET: secret, DRAIN_GRACE_SECONDS: '61' }),
      /DRAIN_GRACE_SECONDS/,
    );
    for (const value of ['0', '61'])
      assert.throws(
        () => loadConfig({ CLUSTER_SECRET: secret, CLUSTER_ASK_TIMEOUT_SECONDS: value }),
        /CLUSTER_ASK_TIMEOUT_SECONDS/,
      );
  });

  it('reads a platform simulator URL and root key', () => {
    const config = loadConfig({
      PLATFORM_URL: 'ws://127.0.0.1:7070/ws/chat',
      PLATFORM_ROOT_KEY: '0F'.repeat(32),
    });
    assert.deepEqual(config.platform, {
      url: 'ws://127.0.0.1:7070/ws/chat',
      rootKey: Buffer.alloc(32, 0x0f),
    });
    assert.deepEqual(loadConfig({ PLATFORM_URL: 'wss://sim.example:443/ws/chat' }).platform, {
      url: 'wss://sim.example:443/ws/chat',
      rootKey: undefined,
    });
  });

  it('reads the CA file of a platform simulator media server (absolute path), only with PLATFORM_URL', () => {
    const config = loadConfig({
      PLATFORM_URL: 'ws://127.0.0.1:7070/ws/chat',
      PLATFORM_CA_FILE: 'sim/ca.pem',
    });
    assert.deepEqual(config.platform, {
      url: 'ws://127.0.0.1:7070/ws/chat',
      rootKey: undefined,
      caFile: resolve('sim/ca.pem'),
    });
    assert.throws(() => loadConfig({ PLATFORM_CA_FILE: '/tmp/ca.pem' }), {
      name: 'ConfigError',
      message:
        'invalid configuration: PLATFORM_CA_FILE needs PLATFORM_URL (the simulator whose media server it certifies)',
    });
  });

  it('reads the platform CA file at boot, naming the variable when it is missing or not PEM', () => {
    const dir = mkdtempSync(join(tmpdir(), 'parley-config-'));
    try {
      const good = join(dir, 'ca.pem');
      writeFileSync(good, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
      assert.match(readCertificateFile('PLATFORM_CA_FILE', good).toString(), /^-----BEGIN CERTIFICATE-----/);
      const missing = join(dir, 'none.pem');
      assert.throws(() => readCertificateFile('PLATFORM_CA_FILE', missing), {
        name: 'ConfigError',
        message: `invalid configuration: PLATFORM_CA_FILE: cannot read "${missing}" (no such file): set PLATFORM_CA_FILE to a readable PEM file or unset it`,
      });
      const text = join(dir, 'notes.txt');
      writeFileSync(text, 'not a certificate');
      assert.throws(() => readCertificateFile('PLATFORM_CA_FILE', text), {
        name: 'ConfigError',
        message: `invalid configuration: PLATFORM_CA_FILE: "${text}" holds no PEM certificate: set PLATFORM_CA_FILE to a PEM file of CA certificates`,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads PostgreSQL, Redis, a hex master key, the retry schedule and allowed CIDRs', () => {
    const config = loadConfig({
      PORT: '9000',
      DATABASE_URL: 'postgres://u@db:5432/parley',
      REDIS_URL: 'redis://127.0.0.1:6379',
      SECRET_KEY: 'ab'.repeat(32),
      WEBHOOK_RETRY_SCHEDULE: '0.5,2',
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32, 10.0.0.0/8,fd00::/8',
      WEBHOOK_TIMEOUT_SECONDS: '1',
      WEBHOOK_CLAIM_STALE_SECONDS: '2.5',
      FFMPEG_PATH: '/opt/ffmpeg/bin/ffmpeg',
    });
    assert.equal(config.webhook.claimStaleMs, 2500);
    assert.equal(config.ffmpegPath, '/opt/ffmpeg/bin/ffmpeg');
    assert.equal(config.port, 9000);
    assert.deepEqual(config.database, {
      dialect: 'postgres',
      url: 'postgres://u@db:5432/parley',
      preparedStatements: true,
      answerTimeoutMs: 30_000,
      poolSize: 10,
    });
    assert.equal(config.redisUrl, 'redis://127.0.0.1:6379');
    assert.deepEqual(config.secretKey, Buffer.alloc(32, 0xab));
    assert.deepEqual(config.webhook.retryScheduleMs, [500, 2000]);
    assert.deepEqual(config.webhook.allowedCidrs, ['127.0.0.1/32', '10.0.0.0/8', 'fd00::/8']);
  });

  it('reads DATABASE_PREPARED_STATEMENTS, on or off (docs/decisions/0055-named-statements.md)', () => {
    const url = 'postgres://u@db:5432/parley';
    assert.deepEqual(loadConfig({ DATABASE_URL: url, DATABASE_PREPARED_STATEMENTS: 'off' }).database, {
      dialect: 'postgres',
      url,
      preparedStatements: false,
      answerTimeoutMs: 30_000,
      poolSize: 10,
    });
    assert.deepEqual(loadConfig({ DATABASE_URL: url, DATABASE_PREPARED_STATEMENTS: 'on' }).database, {
      dialect: 'postgres',
      url,
      preparedStatements: true,
      answerTimeoutMs: 30_000,
      poolSize: 10,
    });
    for (const value of ['yes', 'true', '1']) {
      assert.throws(() => loadConfig({ DATABASE_URL: url, DATABASE_PREPARED_STATEMENTS: value }), {
        name: 'ConfigError',
        message: /^invalid configuration: DATABASE_PREPARED_STATEMENTS: /,
      });
    }
  });

  it('reads DATABASE_ANSWER_TIMEOUT_SECONDS, 0 to 3600 (docs/decisions/0011-store-faults.md)', () => {
    const url = 'postgres://u@db:5432/parley';
    const timeoutOf = (value: string) => {
      const { database } = loadConfig({ DATABASE_URL: url, DATABASE_ANSWER_TIMEOUT_SECONDS: value });
      return database.dialect === 'postgres' ? database.answerTimeoutMs : undefined;
    };
    assert.equal(timeoutOf('5'), 5_000);
    assert.equal(timeoutOf('0.5'), 500);
    assert.equal(timeoutOf('0'), 0, 'never closed');
    for (const value of ['-1', '3601', 'soon']) {
      assert.throws(() => timeoutOf(value), {
        name: 'ConfigError',
        message: /^invalid configuration: DATABASE_ANSWER_TIMEOUT_SECONDS: /,
      });
    }
  });

  it('reads DATABASE_POOL_SIZE, whole connections from 1 to 1000 (docs/decisions/0080-pool-size.md)', () => {
    const url = 'postgres://u@db:5432/parley';
    const sizeOf = (value: string) => {
      const { database } = loadConfig({ DATABASE_URL: url, DATABASE_POOL_SIZE: value });
      return database.dialect === 'postgres' ? database.poolSize : undefined;
    };
    const { database } = loadConfig({ DATABASE_URL: url });
    assert.equal(database.dialect === 'postgres' ? database.poolSize : undefined, DEFAULT_POOL_SIZE);
    assert.equal(sizeOf('1'), 1);
    assert.equal(sizeOf('40'), 40);
    assert.equal(sizeOf('1000'), 1000);
    for (const value of ['0', '1001', '2.5', 'many', '-3']) {
      assert.throws(() => sizeOf(value), {
        name: 'ConfigError',
        message: /^invalid configuration: DATABASE_POOL_SIZE: /,
      });
    }
    assert.deepEqual(
      loadConfig({ DATABASE_POOL_SIZE: '3' }).database,
      { dialect: 'sqlite', path: resolve('./data/parley.db') },
      'SQLite has one connection: the setting does not apply',
    );
  });

  it('reads EVENT_RETENTION_DAYS, whole days from 1 to 3650 (docs/decisions/0030-event-log.md)', () => {
    assert.deepEqual(loadConfig({ EVENT_RETENTION_DAYS: '1' }).events, { retentionMs: 86_400_000 });
    assert.deepEqual(loadConfig({ EVENT_RETENTION_DAYS: '3650' }).events, { retentionMs: 3650 * 86_400_000 });
    for (const value of ['0', '3651', 'week', '-7']) {
      assert.throws(() => loadConfig({ EVENT_RETENTION_DAYS: value }), {
        name: 'ConfigError',
        message: /^invalid configuration: EVENT_RETENTION_DAYS: /,
      });
    }
  });

  it('reads WEBHOOK_LANE_WINDOW, whole requests from 1 to 128, default 64 (docs/decisions/0050-lane-windows.md, docs/decisions/0089-lane-window-default.md)', () => {
    assert.equal(loadConfig({}).webhook.laneWindow, 64);
    assert.equal(loadConfig({ WEBHOOK_LANE_WINDOW: '1' }).webhook.laneWindow, 1);
    assert.equal(loadConfig({ WEBHOOK_LANE_WINDOW: '8' }).webhook.laneWindow, 8);
    assert.equal(loadConfig({ WEBHOOK_LANE_WINDOW: '32' }).webhook.laneWindow, 32);
    assert.equal(loadConfig({ WEBHOOK_LANE_WINDOW: '128' }).webhook.laneWindow, 128);
    for (const value of ['0', '129', '2.5', 'many']) {
      assert.throws(() => loadConfig({ WEBHOOK_LANE_WINDOW: value }), {
        name: 'ConfigError',
        message: /^invalid configuration: WEBHOOK_LANE_WINDOW: /,
      });
    }
  });

  it('reads WEBHOOK_MAX_IN_FLIGHT, whole requests from 1 to 65536, default 256 (docs/decisions/0089-lane-window-default.md)', () => {
    assert.equal(loadConfig({}).webhook.maxInFlight, 256);
    assert.equal(loadConfig({ WEBHOOK_MAX_IN_FLIGHT: '1' }).webhook.maxInFlight, 1);
    assert.equal(loadConfig({ WEBHOOK_MAX_IN_FLIGHT: '65536' }).webhook.maxInFlight, 65_536);
    for (const value of ['0', '65537', '3.5', 'lots', '-1']) {
      assert.throws(() => loadConfig({ WEBHOOK_MAX_IN_FLIGHT: value }), {
        name: 'ConfigError',
        message: /^invalid configuration: WEBHOOK_MAX_IN_FLIGHT: /,
      });
    }
  });

  it('reads WEBHOOK_CONCURRENCY, whole lanes from 1 to 256, default 64 (docs/decisions/0054-delivery-concurrency.md)', () => {
    assert.equal(loadConfig({}).webhook.concurrency, 64);
    assert.equal(loadConfig({ WEBHOOK_CONCURRENCY: '1' }).webhook.concurrency, 1);
    assert.equal(loadConfig({ WEBHOOK_CONCURRENCY: '256' }).webhook.concurrency, 256);
    for (const value of ['0', '257', '8.5', '1e2', 'all']) {
      assert.throws(() => loadConfig({ WEBHOOK_CONCURRENCY: value }), {
        name: 'ConfigError',
        message: /^invalid configuration: WEBHOOK_CONCURRENCY: /,
      });
    }
  });

  it('stops with a message naming the variable and the rule', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ PORT: 'eighty' }, /PORT/],
      [{ PORT: '70000' }, /PORT/],
      [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL/],
      [{ DATABASE_URL: 'mysql://x' }, /DATABASE_URL/],
      [{ REDIS_URL: 'http://x' }, /REDIS_URL/],
      [{ SECRET_KEY: 'short' }, /SECRET_KEY/],
      [{ WEBHOOK_RETRY_SCHEDULE: '5,,10' }, /WEBHOOK_RETRY_SCHEDULE/],
      [{ WEBHOOK_ALLOWED_CIDRS: '10.0.0.0/33' }, /WEBHOOK_ALLOWED_CIDRS: "10\.0\.0\.0\/33" is not a CIDR/],
      [{ PLATFORM_URL: 'http://127.0.0.1:7070/ws/chat' }, /PLATFORM_URL/],
      [
        { PLATFORM_URL: 'ws://bad host/ws' },
        /PLATFORM_URL: "ws:\/\/bad host\/ws" is not a ws:\/\/ or wss:\/\/ URL/,
      ],
      [{ PLATFORM_URL: 'ws://127.0.0.1:1/ws', PLATFORM_ROOT_KEY: 'ab'.repeat(31) }, /PLATFORM_ROOT_KEY/],
      [{ PLATFORM_URL: 'ws://127.0.0.1:1/ws', PLATFORM_ROOT_KEY: 'zz'.repeat(32) }, /PLATFORM_ROOT_KEY/],
      [{ PLATFORM_ROOT_KEY: 'ab'.repeat(32) }, /PLATFORM_ROOT_KEY needs PLATFORM_URL/],
      [{ CLUSTER_SECRET: 'short' }, /CLUSTER_SECRET/],
      [{ NODE_URL: 'http://10.0.0.1:8080' }, /NODE_URL needs CLUSTER_SECRET/],
      [{ NODE_ID: 'n1' }, /NODE_ID needs CLUSTER_SECRET/],
      [{ CLUSTER_SECRET: 's'.repeat(32), NODE_URL: 'ftp://x' }, /NODE_URL/],
      [{ CLUSTER_SECRET: 's'.repeat(32), NODE_ID: 'has space' }, /NODE_ID/],
      [{ CLUSTER_SECRET: 's'.repeat(32), NODE_ID: '-' }, /NODE_ID/],
      [
        { WEBHOOK_CLAIM_STALE_SECONDS: '30' },
        /WEBHOOK_CLAIM_STALE_SECONDS must be more than twice WEBHOOK_TIMEOUT_SECONDS \(30\)/,
      ],
    ];
    for (const [env, pattern] of cases) {
      assert.throws(
        () => loadConfig(env),
        (error: unknown) => error instanceof ConfigError && pattern.test(error.message),
      );
    }
  });
});

describe('values the conversion would silently change are refused (README, "Configuration")', () => {
  const cluster = { CLUSTER_SECRET: 'c'.repeat(32) };
  for (const [name, value] of [
    ['SHUTDOWN_TIMEOUT_SECONDS', 'true'],
    ['WEBHOOK_TIMEOUT_SECONDS', 'true'],
    ['DRAIN_GRACE_SECONDS', 'false'],
    ['DATABASE_ANSWER_TIMEOUT_SECONDS', 'false'],
    ['DRAIN_GRACE_SECONDS', '0x10'],
    ['SHUTDOWN_TIMEOUT_SECONDS', '1e1'],
  ] as const) {
    it(`${name}=${value}: refused, a decimal expected`, () => {
      assert.throws(
        () => loadConfig({ [name]: value, ...cluster }),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.message === `invalid configuration: ${name}: Expected number (a decimal such as 2 or 0.5)`,
      );
    });
  }

  it('decimals are read as written', () => {
    const config = loadConfig({ SHUTDOWN_TIMEOUT_SECONDS: '2.5', DRAIN_GRACE_SECONDS: '.5', ...cluster });
    assert.equal(config.shutdownTimeoutMs, 2500);
    assert.equal(config.cluster?.drainGraceMs, 500);
  });

  for (const [name, zero] of [
    ['SHUTDOWN_TIMEOUT_SECONDS', ''],
    ['WEBHOOK_TIMEOUT_SECONDS', ''],
    ['DATABASE_ANSWER_TIMEOUT_SECONDS', ' (or 0)'],
    ['DRAIN_GRACE_SECONDS', ' (or 0)'],
    ['CLUSTER_ASK_TIMEOUT_SECONDS', ''],
  ] as const) {
    it(`${name}=0.0004 (0 ms once rounded): refused, naming the smallest value`, () => {
      assert.throws(
        () => loadConfig({ [name]: '0.0004', DATABASE_URL: 'postgres://h/db', ...cluster }),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.message ===
            `invalid configuration: ${name}: 0.0004 s is under one millisecond: set at least 0.001${zero}`,
      );
    });
  }

  it('DATABASE_ANSWER_TIMEOUT_SECONDS=0 still turns the watch off', () => {
    const config = loadConfig({ DATABASE_ANSWER_TIMEOUT_SECONDS: '0', DATABASE_URL: 'postgres://h/db' });
    assert.equal((config.database as { answerTimeoutMs?: number }).answerTimeoutMs, 0);
  });

  it('LOG_LEVEL=verbose names the allowed levels', () => {
    assert.throws(() => loadConfig({ LOG_LEVEL: 'verbose' }), {
      message:
        'invalid configuration: LOG_LEVEL: Expected one of fatal, error, warn, info, debug, trace, silent',
    });
  });

  it('DATABASE_PREPARED_STATEMENTS=true names on and off', () => {
    assert.throws(() => loadConfig({ DATABASE_PREPARED_STATEMENTS: 'true' }), {
      message: 'invalid configuration: DATABASE_PREPARED_STATEMENTS: Expected one of on, off',
    });
  });
});
