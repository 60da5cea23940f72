import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { crc32 } from 'node:zlib';
import { generateApiKey, hashApiKey, parseApiKey } from '../src/security/api-keys.ts';
import { loadMasterKey, SecretBox, SecretError } from '../src/security/secrets.ts';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
function decode62(s: string): number {
  return [...s].reduce((n, c) => n * 62 + BASE62.indexOf(c), 0);
}

describe('API key format (docs/decisions/0003-scopes-and-keys.md)', () => {
  it('is svc_<env>_ + 32 base62 + 6 base62 of CRC32 over the random part', () => {
    const { key, hash, prefix } = generateApiKey('test');
    assert.match(key, /^svc_test_[0-9A-Za-z]{38}$/);
    const random = key.slice(9, 41);
    assert.equal(decode62(key.slice(41)), crc32(Buffer.from(random)));
    assert.equal(hash, createHash('sha256').update(key).digest('hex'));
    assert.equal(hashApiKey(key), hash);
    assert.equal(prefix, key.slice(0, 12));
    assert.deepEqual(parseApiKey(key), { env: 'test' });
    assert.deepEqual(parseApiKey(generateApiKey('live').key), { env: 'live' });
  });

  it('rejects malformed keys and wrong checksums', () => {
    const { key } = generateApiKey('live');
    const flipped = key.slice(0, 20) + (key[20] === 'a' ? 'b' : 'a') + key.slice(21);
    assert.equal(parseApiKey(flipped), null);
    assert.equal(parseApiKey(key.slice(0, -1)), null);
    assert.equal(parseApiKey(key.replace('svc_live_', 'svc_prod_')), null);
    assert.equal(parseApiKey(`${key}x`), null);
    assert.equal(parseApiKey(''), null);
  });
});

describe('secrets at rest (docs/decisions/0020-security-promises.md)', () => {
  it('round-trips, uses a fresh IV, and refuses tampering or another key', () => {
    const box = new SecretBox(Buffer.alloc(32, 7));
    const a = box.seal('hmac-key-0123456789abcdef0123456789');
    const b = box.seal('hmac-key-0123456789abcdef0123456789');
    assert.notEqual(a, b);
    assert.equal(box.open(a), 'hmac-key-0123456789abcdef0123456789');
    assert.ok(!a.includes('hmac-key'));
    const parts = a.split('.');
    const body = Buffer.from(parts[3] ?? '', 'base64url');
    body[0] = (body[0] ?? 0) ^ 1;
    parts[3] = body.toString('base64url');
    assert.throws(() => box.open(parts.join('.')), SecretError);
    assert.throws(() => new SecretBox(Buffer.alloc(32, 8)).open(a), SecretError);
  });

  it('openKept keeps what it opened, small values only, the oldest going first; open keeps nothing', () => {
    const box = new SecretBox(Buffer.alloc(32, 7), { openedEntries: 2 });
    const [a, b, c] = ['hmac-a', 'hmac-b', 'hmac-c'].map((value) => box.seal(value));
    assert.ok(a !== undefined && b !== undefined && c !== undefined);
    assert.equal(box.open(a), 'hmac-a');
    assert.equal(box.keptCount, 0, 'open keeps nothing');
    assert.equal(box.openKept(a), 'hmac-a');
    assert.equal(box.openKept(a), 'hmac-a');
    assert.equal(box.keptCount, 1);
    assert.ok(box.keeps(a));
    const [version, iv, tag, body] = a.split('.');
    const flipped = [version, iv, tag, `${body?.[0] === 'A' ? 'B' : 'A'}${body?.slice(1)}`].join('.');
    assert.throws(() => box.openKept(flipped), SecretError);
    assert.equal(box.keptCount, 1, 'a text that does not open is not kept');
    assert.ok(!box.keeps(flipped));
    assert.throws(() => new SecretBox(Buffer.alloc(32, 8)).openKept(a), SecretError);
    assert.equal(box.openKept(b), 'hmac-b');
    assert.equal(box.openKept(c), 'hmac-c');
    assert.equal(box.keptCount, 2, 'bounded by openedEntries');
    assert.deepEqual(
      [box.keeps(a), box.keeps(b), box.keeps(c)],
      [false, true, true],
      'the oldest went first',
    );
    assert.equal(box.openKept(a), 'hmac-a', 'a value no longer kept opens again');
    assert.deepEqual([box.keeps(a), box.keeps(b), box.keeps(c)], [true, false, true]);
    const roomy = new SecretBox(Buffer.alloc(32, 7));
    const large = roomy.seal('x'.repeat(1000));
    assert.equal(roomy.openKept(large), 'x'.repeat(1000));
    assert.equal(roomy.keptCount, 0, 'a large sealed text is opened each time, not kept');
    const none = new SecretBox(Buffer.alloc(32, 7), { openedEntries: 0 });
    assert.equal(none.openKept(a), 'hmac-a');
    assert.equal(none.keptCount, 0);
  });

  it('creates the key file once with mode 0600 and reads it back', () => {
    const dir = mkdtempSync(join(tmpdir(), 'parley-key-'));
    const first = loadMasterKey(dir, undefined);
    const second = loadMasterKey(dir, undefined);
    assert.equal(first.length, 32);
    assert.deepEqual(first, second);
    assert.equal(statSync(join(dir, 'secret.key')).mode & 0o777, 0o600);
    const configured = Buffer.alloc(32, 1);
    assert.equal(loadMasterKey(dir, configured), configured);
  });
});
