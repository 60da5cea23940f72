import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { assertOneLineFailure, serveUntilExit } from '../support/parley-process.ts';

describe('start-up errors print one line naming the setting (docs/deploy.md "Start-up errors")', () => {
  it('a HOST that does not resolve', async () => {
    const result = await serveUntilExit({ PORT: '0', HOST: 'parley-host.invalid' });
    assertOneLineFailure(result, /^parley: .*HOST/);
  });

  it('a key file in DATA_DIR that does not hold a key', async () => {
    const result = await serveUntilExit({ PORT: '0' }, (dataDir) =>
      writeFileSync(join(dataDir, 'secret.key'), 'garbage\n'),
    );
    assertOneLineFailure(result, /^parley: .*secret\.key.*(DATA_DIR|SECRET_KEY)/);
  });
});

describe('a REDIS_URL that is not a URL (README "Configuration")', () => {
  it('stops the start with one line naming REDIS_URL', async () => {
    const result = await serveUntilExit({ PORT: '0', REDIS_URL: 'redis://127.0.0.1:99999/9' });
    assertOneLineFailure(result, /^parley: .*REDIS_URL/);
  });
});
