import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cidrContains, parseCidr, parseIp } from '../../src/net/addresses.ts';
import {
  classifyAddress,
  OutboundError,
  OutboundGuard,
  type ResolvedAddress,
} from '../../src/net/outbound-guard.ts';
import { rejectsWith } from './support.ts';

describe('classifyAddress: IPv4 (docs/decisions/0020-security-promises.md, IANA special-purpose registry)', () => {
  const cases: [string, string | null][] = [
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'reserved'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['100.64.0.1', 'cgnat'],
    ['100.127.255.255', 'cgnat'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['169.254.0.1', 'link-local'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.0.0.8', 'reserved'],
    ['192.0.2.10', 'documentation'],
    ['192.88.99.1', 'reserved'],
    ['192.168.1.1', 'private'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.9', 'documentation'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'broadcast'],
    // Cloud metadata endpoints are named as such, before their enclosing range.
    ['169.254.169.254', 'metadata'],
    ['169.254.170.2', 'metadata'],
    ['100.100.100.200', 'metadata'],
    ['192.0.0.192', 'metadata'],
    ['168.63.129.16', 'metadata'],
    // Public, including the neighbours of every private edge.
    ['8.8.8.8', null],
    ['1.1.1.1', null],
    ['9.255.255.255', null],
    ['11.0.0.0', null],
    ['100.63.255.255', null],
    ['100.128.0.0', null],
    ['126.255.255.255', null],
    ['128.0.0.0', null],
    ['169.253.255.255', null],
    ['169.255.0.0', null],
    ['172.15.255.255', null],
    ['172.32.0.0', null],
    ['192.167.255.255', null],
    ['192.169.0.0', null],
    ['198.17.255.255', null],
    ['198.20.0.0', null],
    ['223.255.255.255', null],
  ];
  for (const [ip, expected] of cases) {
    it(`${ip} → ${expected ?? 'public'}`, () => assert.equal(classifyAddress(ip), expected));
  }
});

describe('classifyAddress: IPv6', () => {
  const cases: [string, string | null][] = [
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    // Every IPv4-mapped form is refused, whatever it embeds (docs/decisions/0020-security-promises.md).
    ['::ffff:127.0.0.1', 'ipv4-mapped'],
    ['::ffff:7f00:1', 'ipv4-mapped'],
    ['::ffff:10.0.0.1', 'ipv4-mapped'],
    ['::ffff:8.8.8.8', 'ipv4-mapped'],
    ['0:0:0:0:0:ffff:a9fe:a9fe', 'ipv4-mapped'],
    ['::127.0.0.1', 'ipv4-compatible'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['febf:ffff::1', 'link-local'],
    ['fec0::1', 'site-local'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456:789a::1', 'unique-local'],
    ['ff02::1', 'multicast'],
    ['ff05::1:3', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation'],
    ['2001:2::1', 'benchmarking'],
    ['2001:10::1', 'reserved'],
    ['100::1', 'reserved'],
    ['5f00::1', 'reserved'],
    ['4000::1', 'reserved'],
    ['fd00:ec2::254', 'metadata'],
    ['fd00:ec2::253', 'metadata'],
    ['fe80::a9fe:a9fe', 'metadata'],
    // NAT64 (RFC 6052): blocked when the embedded IPv4 is blocked; the local-use prefix always.
    ['64:ff9b::127.0.0.1', 'nat64'],
    ['64:ff9b::a00:1', 'nat64'],
    ['64:ff9b::a9fe:a9fe', 'nat64'],
    ['64:ff9b::808:808', null],
    ['64:ff9b:1::808:808', 'nat64'],
    // 6to4 (RFC 3056): IPv4 in bits 16–47.
    ['2002:7f00:1::1', '6to4'],
    ['2002:c0a8:101::', '6to4'],
    ['2002:a9fe:a9fe::1', '6to4'],
    ['2002:808:808::1', null],
    // Teredo (RFC 4380): client IPv4 inverted in the last 32 bits, server IPv4 in bits 32–63.
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'teredo'], // RFC 4380 example: client 192.0.2.45
    ['2001:0:4136:e378::80ff:fffe', 'teredo'], // client 127.0.0.1
    ['2001:0:a00:1::f7f7:f7f7', 'teredo'], // server 10.0.0.1
    ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', null], // client 8.8.8.8, server 65.54.227.120
    // Public.
    ['2606:4700:4700::1111', null],
    ['2001:4860:4860::8888', null],
    ['2a00:1450:4001:80b::200e', null],
  ];
  for (const [ip, expected] of cases) {
    it(`${ip} → ${expected ?? 'public'}`, () => assert.equal(classifyAddress(ip), expected));
  }

  it('throws on anything that is not an IP literal', () => {
    for (const input of ['localhost', '2130706433', '127.1', '[::1]', '', '1.2.3.4.5', '::ffff:1.2.3']) {
      assert.throws(() => classifyAddress(input), TypeError, input);
    }
  });
});

describe('address parsing and CIDR matching', () => {
  it('expands every IPv6 text form to the same bytes', () => {
    const expected = parseIp('0:0:0:0:0:ffff:7f00:1')?.bytes;
    for (const form of [
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '0::ffff:7f00:0001',
      '0:0:0:0:0:ffff:127.0.0.1',
    ]) {
      assert.deepEqual(parseIp(form)?.bytes, expected, form);
    }
    assert.deepEqual(
      Array.from(parseIp('1:2:3:4:5:6:7.8.9.10')?.bytes ?? []),
      [0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 7, 8, 9, 10],
    );
    assert.deepEqual(Array.from(parseIp('a::b')?.bytes ?? []), [0, 10, ...Array(12).fill(0), 0, 11]);
  });

  it('matches prefixes bit by bit and never across families', () => {
    const block = parseCidr('10.1.2.3/15');
    assert.ok(block);
    assert.deepEqual(Array.from(block.bytes), [10, 0, 0, 0]);
    const inside = (ip: string) => {
      const parsed = parseIp(ip);
      assert.ok(parsed);
      return cidrContains(block, parsed);
    };
    assert.equal(inside('10.1.255.255'), true);
    assert.equal(inside('10.2.0.0'), false);
    assert.equal(inside('::ffff:10.0.0.1'), false);
    assert.equal(parseCidr('10.0.0.0/33'), null);
    assert.equal(parseCidr('::/129'), null);
    assert.equal(parseCidr('10.0.0.0'), null);
    assert.equal(parseCidr('example.com/8'), null);
  });
});

describe('OutboundGuard.parseUrl (docs/decisions/0020-security-promises.md: HTTPS only)', () => {
  const guard = new OutboundGuard({ allowedCidrs: [] });

  it('refuses every other scheme with reason "scheme"', () => {
    for (const url of [
      'http://example.com/hook',
      'ftp://example.com/file',
      'file:///etc/passwd',
      'data:text/plain;base64,aGk=',
      'javascript:alert(1)',
      'ws://example.com/',
      'gopher://example.com/',
    ]) {
      assert.throws(
        () => guard.parseUrl(url),
        (error: unknown) => error instanceof OutboundError && error.reason === 'scheme',
        url,
      );
    }
    assert.throws(() => guard.parseUrl('http://example.com/'), /URL must use https \(got http\)/);
  });

  it('refuses userinfo, garbage and over-long URLs with reason "invalid-url"', () => {
    for (const url of [
      'https://user:secret@example.com/',
      'https://user@example.com/',
      'https://:pw@example.com/',
      'not a url',
      'https://',
      '/relative/path',
      `https://example.com/${'a'.repeat(5000)}`,
    ]) {
      assert.throws(
        () => guard.parseUrl(url),
        (error: unknown) => error instanceof OutboundError && error.reason === 'invalid-url',
        url,
      );
    }
  });

  it('accepts https URLs and normalises odd IPv4 forms to the real address', () => {
    assert.equal(guard.parseUrl('https://Example.COM:8443/hook?x=1').host, 'example.com:8443');
    assert.equal(guard.parseUrl('https://2130706433/').hostname, '127.0.0.1');
    assert.equal(guard.parseUrl('https://0x7f.1/').hostname, '127.0.0.1');
    assert.equal(guard.parseUrl('https://017700000001/').hostname, '127.0.0.1');
    assert.equal(guard.parseUrl('https://127.1/').hostname, '127.0.0.1');
    assert.equal(guard.parseUrl('https://[::ffff:127.0.0.1]/').hostname, '[::ffff:7f00:1]');
  });
});

describe('OutboundGuard.checkHost (configuration-time check)', () => {
  const lookupOf =
    (table: Record<string, ResolvedAddress[]>) =>
    async (hostname: string): Promise<ResolvedAddress[]> => {
      const found = table[hostname];
      if (found === undefined) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
      return found;
    };
  const guard = new OutboundGuard({
    allowedCidrs: [],
    lookup: lookupOf({
      'public.example': [{ address: '93.184.216.34', family: 4 }],
      'dual.example': [
        { address: '2606:2800:220:1::1', family: 6 },
        { address: '93.184.216.34', family: 4 },
      ],
      'mixed.example': [
        { address: '93.184.216.34', family: 4 },
        { address: '10.0.0.7', family: 4 },
      ],
      'mapped.example': [{ address: '::ffff:169.254.169.254', family: 6 }],
      'empty.example': [],
    }),
  });
  const check = (url: string) => guard.checkHost(new URL(url));

  it('refuses literal addresses in every odd form, naming address and range', async () => {
    await rejectsWith(
      () => check('https://127.0.0.1/'),
      'blocked-address',
      /^address 127\.0\.0\.1 is not allowed \(loopback\)$/,
    );
    await rejectsWith(() => check('https://2130706433/'), 'blocked-address', /127\.0\.0\.1.*loopback/);
    await rejectsWith(() => check('https://0x7f.0.0.1/'), 'blocked-address', /loopback/);
    await rejectsWith(() => check('https://0/'), 'blocked-address', /unspecified/);
    await rejectsWith(() => check('https://[::1]/'), 'blocked-address', /loopback/);
    await rejectsWith(() => check('https://[::ffff:127.0.0.1]/'), 'blocked-address', /ipv4-mapped/);
    await rejectsWith(
      () => check('https://169.254.169.254/latest/meta-data/'),
      'blocked-address',
      /metadata/,
    );
    await rejectsWith(() => check('https://[fd00:ec2::254]/'), 'blocked-address', /metadata/);
    await rejectsWith(
      () => check('https://[64:ff9b::10.0.0.1]/'),
      'blocked-address',
      /nat64 embedding 10\.0\.0\.1: private/,
    );
    await rejectsWith(
      () => check('https://[2002:c0a8:0101::1]/'),
      'blocked-address',
      /6to4 embedding 192\.168\.1\.1: private/,
    );
    await rejectsWith(() => check('http://8.8.8.8/'), 'scheme');
  });

  it('returns the address to pin for a public literal or name', async () => {
    assert.equal(await check('https://8.8.8.8/'), '8.8.8.8');
    assert.equal(await check('https://[2606:4700:4700::1111]/'), '2606:4700:4700::1111');
    assert.equal(await check('https://public.example/hook'), '93.184.216.34');
    assert.equal(await check('https://dual.example/hook'), '2606:2800:220:1::1');
  });

  it('refuses a name if any one of its addresses is blocked', async () => {
    await rejectsWith(
      () => check('https://mixed.example/'),
      'blocked-address',
      /^host mixed\.example resolves to 10\.0\.0\.7, which is not allowed \(private\)$/,
    );
    await rejectsWith(() => check('https://mapped.example/'), 'blocked-address', /metadata/);
  });

  it('reports names that do not resolve as "dns"', async () => {
    await rejectsWith(
      () => check('https://nowhere.example/'),
      'dns',
      /nowhere\.example could not be resolved \(ENOTFOUND\)/,
    );
    await rejectsWith(() => check('https://empty.example/'), 'dns', /has no address/);
  });

  it('gives up on a lookup that never answers with "timeout"', async () => {
    const stuck = new OutboundGuard({ allowedCidrs: [], lookup: () => new Promise(() => undefined) });
    await rejectsWith(() => stuck.checkHost(new URL('https://slow.example/'), 50), 'timeout');
  });

  it('lets allowed CIDRs through, except cloud metadata', async () => {
    const allowing = new OutboundGuard({
      allowedCidrs: ['10.0.0.0/8', '169.254.0.0/16', 'fd00::/8', '64:ff9b::/96'],
      lookup: lookupOf({ 'internal.example': [{ address: '10.20.30.40', family: 4 }] }),
    });
    assert.equal(await allowing.checkHost(new URL('https://10.1.2.3/')), '10.1.2.3');
    assert.equal(await allowing.checkHost(new URL('https://internal.example/')), '10.20.30.40');
    assert.equal(await allowing.checkHost(new URL('https://169.254.1.1/')), '169.254.1.1');
    assert.equal(await allowing.checkHost(new URL('https://[fd12::1]/')), 'fd12::1');
    await rejectsWith(
      () => allowing.checkHost(new URL('https://169.254.169.254/')),
      'blocked-address',
      /metadata/,
    );
    await rejectsWith(
      () => allowing.checkHost(new URL('https://[fd00:ec2::254]/')),
      'blocked-address',
      /metadata/,
    );
    await rejectsWith(
      () => allowing.checkHost(new URL('https://[64:ff9b::169.254.169.254]/')),
      'blocked-address',
      /nat64 embedding 169\.254\.169\.254: metadata/,
    );
    await rejectsWith(
      () => allowing.checkHost(new URL('https://192.168.0.1/')),
      'blocked-address',
      /private/,
    );
    // An IPv4 allowance does not open the IPv4-mapped form.
    await rejectsWith(
      () => allowing.checkHost(new URL('https://[::ffff:10.1.2.3]/')),
      'blocked-address',
      /ipv4-mapped/,
    );
    const everything = new OutboundGuard({ allowedCidrs: ['0.0.0.0/0', '::/0'] });
    assert.equal(await everything.checkHost(new URL('https://127.0.0.1/')), '127.0.0.1');
    await rejectsWith(
      () => everything.checkHost(new URL('https://169.254.169.254/')),
      'blocked-address',
      /metadata/,
    );
  });

  it('uses the system resolver by default (localhost resolves to loopback and is refused)', async () => {
    const system = new OutboundGuard({ allowedCidrs: [] });
    await rejectsWith(
      () => system.checkHost(new URL('https://localhost/')),
      'blocked-address',
      /^host localhost resolves to (127\.0\.0\.1|::1), which is not allowed \(loopback\)$/,
    );
  });

  it('rejects a malformed allowed CIDR at construction', () => {
    for (const bad of ['10.0.0.0/33', '10.0.0.0', 'localhost/8', '::/200']) {
      assert.throws(() => new OutboundGuard({ allowedCidrs: [bad] }), TypeError, bad);
    }
  });
});
