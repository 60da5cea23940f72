import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { DomainError } from '../../src/domain/errors.ts';
import { MediaStore } from '../../src/media/store.ts';
import { fixture } from '../messages/support.ts';
import { manualClock } from '../support/app.ts';

async function* chunks(data: Buffer, size = 100): AsyncGenerator<Buffer> {
  for (let i = 0; i < data.length; i += size) yield data.subarray(i, i + size);
}

async function read(store: MediaStore, instance: string, id: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of store.read(instance, id)) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

describe('local media store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'parley-media-store-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const instance = '0b5e8f3a-1c2d-4e5f-8a9b-0c1d2e3f4a5b';
  const DAY = 86_400_000;

  it('keeps the bytes with their type from the bytes, size and fetch time', async () => {
    const clock = manualClock(1_700_000_000_000);
    const store = new MediaStore({ dir, clock });
    const png = fixture('tiny.png');
    const stored = await store.put(instance, 'A1', chunks(png), 1024, 'the limit');
    assert.deepEqual(stored, { mimetype: 'image/png', ext: 'png', size: png.length, storedAt: clock() });
    assert.deepEqual(await store.find(instance, 'A1'), stored);
    assert.ok((await read(store, instance, 'A1')).equals(png));
    assert.equal(await store.find(instance, 'unknown'), undefined);
  });

  it('refuses a file over the limit and keeps nothing of it', async () => {
    const store = new MediaStore({ dir, clock: manualClock() });
    await assert.rejects(
      store.put(instance, 'BIG', chunks(Buffer.alloc(2000)), 1000, 'the 1 KB limit'),
      (e) => {
        assert.ok(e instanceof DomainError);
        assert.deepEqual(
          [e.code, e.message],
          ['too_large', 'media of message BIG is larger than the 1 KB limit'],
        );
        return true;
      },
    );
    assert.equal(await store.find(instance, 'BIG'), undefined);
    assert.deepEqual(
      readdirSync(join(dir, instance)).filter((n) => n.endsWith('.part')),
      [],
      'no partial file left',
    );
  });

  it('prunes files fetched before the cut-off, and hour-old leftovers of interrupted writes', async () => {
    const clock = manualClock(1_800_000_000_000);
    const store = new MediaStore({ dir, clock });
    await store.put(instance, 'OLD', chunks(fixture('tiny.jpg')), 1 << 20, 'the limit');
    clock.advance(10 * DAY);
    await store.put(instance, 'NEW', chunks(fixture('tiny.gif')), 1 << 20, 'the limit');
    const folder = join(dir, instance);
    const oldPart = join(folder, '.interrupted.part');
    const orphan = join(folder, 'f'.repeat(64));
    const freshPart = join(folder, '.writing.part');
    for (const path of [oldPart, orphan, freshPart]) writeFileSync(path, 'x');
    const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000);
    utimesSync(oldPart, twoHoursAgo, twoHoursAgo);
    utimesSync(orphan, twoHoursAgo, twoHoursAgo);
    assert.equal(
      await store.prune(clock() - 5 * DAY),
      2,
      'OLD and A1 were fetched before the cut-off (leftovers are not counted)',
    );
    assert.equal(await store.find(instance, 'OLD'), undefined);
    assert.ok(await store.find(instance, 'NEW'));
    const left = readdirSync(folder);
    assert.ok(!left.includes('.interrupted.part') && !left.includes('f'.repeat(64)), 'old leftovers removed');
    assert.ok(left.includes('.writing.part'), 'a write in progress is kept');
  });
});
