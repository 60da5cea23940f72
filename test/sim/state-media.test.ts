/**
 * The media server across a simulator restart with a state directory: the same CA (clients keep trusting it),
 * the same port (media URLs carry the host), the same signing key (direct paths stay valid) and every file
 * uploaded before the restart served byte for byte; each phone's kept media (what it uploads again on request)
 * survives too; a corrupt media identity is a clear error.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { MediaStateError } from '../../sim/media/persist.ts';
import { startSimulator } from '../../sim/simulator.ts';

const dirs: string[] = [];
function stateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'parley-sim-media-'));
  dirs.push(dir);
  return dir;
}
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('simulator media across a restart with --state-dir', () => {
  it('keeps the CA, the port and every stored file; direct paths issued before still download', async () => {
    const dir = stateDir();
    const first = await startSimulator({ stateDir: dir });
    const bytes = randomBytes(4096);
    const stored = first.media.put('image', bytes);
    const { port, ca } = first.media;
    assert.deepEqual(await first.media.download(stored.directPath), bytes);
    await first.close();

    const second = await startSimulator({ stateDir: dir });
    try {
      assert.equal(second.media.port, port);
      assert.equal(second.mediaCa, ca);
      assert.equal(second.media.count(), 1);
      assert.equal(second.media.get(stored.directPath)?.url, stored.url);
      // Over HTTPS, trusting the CA clients were given before the restart, with the signature issued before it.
      assert.deepEqual(await second.media.download(stored.directPath), bytes);
      const later = second.media.put('document', Buffer.from('after the restart'));
      assert.deepEqual(await second.media.download(later.directPath), Buffer.from('after the restart'));
    } finally {
      await second.close();
    }
  });

  it('a phone keeps the media it sent across the restart (to upload it again on request)', async () => {
    const dir = stateDir();
    const first = await startSimulator({ stateDir: dir });
    const ana = first.context.accounts.create({ phone: '5511988887777', pushName: 'Ana' });
    const file = randomBytes(1024);
    ana.keptMedia = new Map([['aGFzaA==', file]]);
    await first.close();
    const second = await startSimulator({ stateDir: dir });
    try {
      assert.deepEqual(second.context.accounts.get('5511988887777')?.keptMedia?.get('aGFzaA=='), file);
    } finally {
      await second.close();
    }
  });

  it('without a state directory every start has a new CA and no files', async () => {
    const a = await startSimulator();
    const b = await startSimulator();
    try {
      a.media.put('image', Buffer.from('x'));
      assert.notEqual(a.mediaCa, b.mediaCa);
      assert.equal(b.media.count(), 0);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('a corrupt media identity: the simulator refuses to start and names the file', async () => {
    const dir = stateDir();
    writeFileSync(join(dir, 'media-identity.json'), '{"ca":');
    await assert.rejects(startSimulator({ stateDir: dir }), (error: unknown) => {
      assert.ok(error instanceof MediaStateError);
      assert.match(error.message, /^media state .*media-identity\.json cannot be read back .*; move it away/);
      return true;
    });
  });
});
