import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.ts';

describe('media store settings (MEDIA_RETENTION_DAYS, MEDIA_MAX_MB)', () => {
  it('defaults: 30 days, 100 MB, the media folder inside DATA_DIR', () => {
    const config = loadConfig({ DATA_DIR: '/srv/parley' });
    assert.deepEqual(config.media, {
      dir: resolve('/srv/parley', 'media'),
      retentionMs: 30 * 86_400_000,
      maxBytes: 100 * 1024 * 1024,
    });
  });

  it('set values are used; out-of-range values are refused naming the variable', () => {
    const config = loadConfig({ MEDIA_RETENTION_DAYS: '7', MEDIA_MAX_MB: '16' });
    assert.equal(config.media.retentionMs, 7 * 86_400_000);
    assert.equal(config.media.maxBytes, 16 * 1024 * 1024);
    assert.throws(() => loadConfig({ MEDIA_MAX_MB: '0' }), {
      name: 'ConfigError',
      message: /^invalid configuration: MEDIA_MAX_MB: /,
    });
    assert.throws(() => loadConfig({ MEDIA_RETENTION_DAYS: 'soon' }), {
      name: 'ConfigError',
      message: /^invalid configuration: MEDIA_RETENTION_DAYS: /,
    });
  });
});
