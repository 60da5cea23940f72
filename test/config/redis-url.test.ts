import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.ts';

describe('REDIS_URL is checked at start (README "Configuration": a bad value stops the process naming it)', () => {
  for (const value of ['redis://127.0.0.1:99999/9', 'redis://:@/9', 'redis://127.0.0.1:6379/abc']) {
    it(`refuses ${value} with a message naming REDIS_URL`, () => {
      assert.throws(
        () => loadConfig({ REDIS_URL: value }),
        (error: unknown) => error instanceof ConfigError && error.message.includes('REDIS_URL'),
      );
    });
  }

  for (const value of ['redis://127.0.0.1:6379', 'redis://127.0.0.1:6379/', 'rediss://u:p@h:6380/9']) {
    it(`accepts ${value}`, () => {
      assert.equal(loadConfig({ REDIS_URL: value }).redisUrl, value);
    });
  }
});
