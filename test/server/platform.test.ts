import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { WA_CERT_DETAILS } from 'baileys';
import pino from 'pino';
import { loadConfig } from '../../src/config/config.ts';
import { platformWarning, startServer } from '../../src/server.ts';
import { createTestApp } from '../support/app.ts';

const platformRoot = WA_CERT_DETAILS.PUBLIC_KEY;

describe('boot pointed at a platform simulator (docs/decisions/0007-simulator.md)', () => {
  after(() => {
    WA_CERT_DETAILS.PUBLIC_KEY = platformRoot;
  });

  it('says which variables are set and where live instances connect; nothing without them', () => {
    const url = 'ws://127.0.0.1:7070/ws/chat';
    assert.equal(
      platformWarning(loadConfig({ PLATFORM_URL: url, PLATFORM_ROOT_KEY: 'ab'.repeat(32) })),
      `PLATFORM_URL and PLATFORM_ROOT_KEY set: live instances connect to the platform simulator at ${url}, not to WhatsApp`,
    );
    assert.equal(
      platformWarning(loadConfig({ PLATFORM_URL: url })),
      `PLATFORM_URL set: live instances connect to the platform simulator at ${url}, not to WhatsApp`,
    );
    assert.equal(
      platformWarning(
        loadConfig({ PLATFORM_URL: url, PLATFORM_ROOT_KEY: 'ab'.repeat(32), PLATFORM_CA_FILE: 'ca.pem' }),
      ),
      `PLATFORM_URL, PLATFORM_ROOT_KEY and PLATFORM_CA_FILE set: live instances connect to the platform simulator at ${url}, not to WhatsApp`,
    );
    assert.equal(platformWarning(loadConfig({})), undefined);
  });

  it('logs the warning at boot, and trusts the root key once a live session is made', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'parley-platform-'));
    const url = 'ws://127.0.0.1:7070/ws/chat';
    const config = loadConfig({
      DATA_DIR: dataDir,
      PORT: '0',
      HOST: '127.0.0.1',
      PLATFORM_URL: url,
      PLATFORM_ROOT_KEY: 'cd'.repeat(32),
    });
    const lines: { level: number; msg: string; platformUrl?: string }[] = [];
    const logger = pino({ level: 'info' }, { write: (chunk: string) => lines.push(JSON.parse(chunk)) });
    const server = await startServer(config, { logger, print: () => {} });
    try {
      const warnings = lines.filter((line) => line.level === 40);
      assert.deepEqual(
        warnings.map((line) => [line.msg, line.platformUrl]),
        [[platformWarning(config), url]],
      );
    } finally {
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
    // The live engine is loaded, and the root key trusted, when the first live session is made
    // (docs/decisions/0068-engines-loaded-on-first-use.md).
    const t = await createTestApp({ env: { PLATFORM_URL: url, PLATFORM_ROOT_KEY: 'ef'.repeat(32) } });
    try {
      assert.notDeepEqual(WA_CERT_DETAILS.PUBLIC_KEY, Buffer.alloc(32, 0xef));
      const live = await t.newInstance('live');
      const session = await t.services.sessions.session(live);
      assert.equal(session.state().connected, false);
      assert.deepEqual(WA_CERT_DETAILS.PUBLIC_KEY, Buffer.alloc(32, 0xef));
    } finally {
      await t.close();
    }
  });
});
