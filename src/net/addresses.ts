import { isIPv4, isIPv6 } from 'node:net';

/**
 * IP address parsing, CIDR matching and the blocked-range classifier behind the outbound guard
 * (docs/decisions/0020-security-promises.md). Pure functions: no DNS, no sockets.
 *
 * Range sources: IANA IPv4/IPv6 Special-Purpose Address Registries (RFC 6890 and updates), RFC 1918
 * (private), RFC 6598 (CGNAT), RFC 3927 / RFC 4291 (link-local), RFC 4193 (unique-local), RFC 5737 /
 * RFC 3849 / RFC 9637 (documentation), RFC 2544 / RFC 5180 (benchmarking), RFC 3056 (6to4), RFC 4380
 * (Teredo), RFC 6052 / RFC 8215 (NAT64), RFC 4291 §2.5.5 (IPv4-compatible and IPv4-mapped).
 */

/** An address as bytes: 4 for IPv4, 16 for IPv6 (network order). */
export interface ParsedIp {
  family: 4 | 6;
  bytes: Uint8Array;
}

/** A CIDR block: network bytes (host bits cleared) and prefix length in bits. */
export interface Cidr {
  family: 4 | 6;
  bytes: Uint8Array;
  prefix: number;
  /** The block as written by the operator, for messages. */
  source: string;
}

/**
 * Parses an IP address literal into bytes.
 * Accepts dotted-quad IPv4 and any RFC 4291 text form of IPv6 (including a trailing dotted IPv4 and a
 * `%zone` suffix, which is ignored). Brackets are not accepted. Returns null for anything else.
 */
export function parseIp(text: string): ParsedIp | null {
  if (isIPv4(text)) {
    return { family: 4, bytes: Uint8Array.from(text.split('.').map((part) => Number(part))) };
  }
  const bare = text.includes('%') ? text.slice(0, text.indexOf('%')) : text;
  if (!isIPv6(bare)) return null;
  return { family: 6, bytes: parseIPv6(bare) };
}

function parseIPv6(text: string): Uint8Array {
  let body = text;
  const tailBytes: number[] = [];
  const lastColon = body.lastIndexOf(':');
  const tail = body.slice(lastColon + 1);
  if (tail.includes('.')) {
    for (const part of tail.split('.')) tailBytes.push(Number(part));
    // Keep the colon so that "::1.2.3.4" leaves "::" behind, not ":".
    body = body.slice(0, lastColon + 1);
    if (body.endsWith(':') && !body.endsWith('::')) body = body.slice(0, -1);
  }
  const groupsWanted = 8 - tailBytes.length / 2;
  const [head = '', rest] = body.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const restGroups = rest === undefined || rest === '' ? [] : rest.split(':');
  const zeros = rest === undefined ? 0 : groupsWanted - headGroups.length - restGroups.length;
  const groups = [...headGroups, ...Array<string>(zeros).fill('0'), ...restGroups];
  const bytes = new Uint8Array(16);
  groups.forEach((group, index) => {
    const value = Number.parseInt(group, 16);
    bytes[index * 2] = value >> 8;
    bytes[index * 2 + 1] = value & 0xff;
  });
  bytes.set(tailBytes, 16 - tailBytes.length);
  return bytes;
}

/** Dotted-quad text of 4 bytes. */
export function formatIPv4(bytes: Uint8Array): string {
  return Array.from(bytes.subarray(0, 4)).join('.');
}

/**
 * Parses `address/prefix` (IPv4 or IPv6). Host bits beyond the prefix are cleared, as `BlockList` does.
 * Returns null when the address is not an IP literal or the prefix is out of range (0–32, 0–128).
 */
export function parseCidr(text: string): Cidr | null {
  const slash = text.indexOf('/');
  if (slash < 0) return null;
  const ip = parseIp(text.slice(0, slash));
  const prefixText = text.slice(slash + 1);
  if (ip === null || !/^\d{1,3}$/.test(prefixText)) return null;
  const prefix = Number(prefixText);
  if (prefix > ip.bytes.length * 8) return null;
  const bytes = Uint8Array.from(ip.bytes);
  for (let bit = prefix; bit < bytes.length * 8; bit++) {
    const index = bit >> 3;
    bytes[index] = (bytes[index] ?? 0) & ~(0x80 >> (bit & 7));
  }
  return { family: ip.family, bytes, prefix, source: text };
}

/** Whether `ip` lies inside `cidr`. Families must match: an IPv4 block never matches an IPv6 address. */
export function cidrContains(cidr: Cidr, ip: ParsedIp): boolean {
  if (cidr.family !== ip.family) return false;
  return prefixEquals(cidr.bytes, ip.bytes, cidr.prefix);
}

function prefixEquals(a: Uint8Array, b: Uint8Array, prefix: number): boolean {
  const whole = prefix >> 3;
  for (let i = 0; i < whole; i++) if (a[i] !== b[i]) return false;
  const rest = prefix & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return ((a[whole] ?? 0) & mask) === ((b[whole] ?? 0) & mask);
}

interface Range {
  cidr: Cidr;
  name: string;
}

function ranges(entries: [string, string][]): Range[] {
  return entries.map(([block, name]) => {
    const cidr = parseCidr(block);
    if (cidr === null) throw new Error(`bad built-in range ${block}`);
    return { cidr, name };
  });
}

/**
 * Cloud instance metadata and platform endpoints: always refused, even when an operator's allowed CIDR
 * covers them (docs/decisions/0020-security-promises.md). AWS IMDS, DNS, NTP (IPv4 and IPv6), AWS ECS task metadata,
 * Azure WireServer, Alibaba Cloud, Oracle Cloud legacy, OpenStack IPv6 metadata. GCP and Azure IMDS use
 * 169.254.169.254.
 */
const METADATA = ranges([
  ['169.254.169.254/32', 'metadata'],
  ['169.254.169.253/32', 'metadata'],
  ['169.254.169.123/32', 'metadata'],
  ['169.254.170.2/32', 'metadata'],
  ['169.254.170.23/32', 'metadata'],
  ['100.100.100.200/32', 'metadata'],
  ['192.0.0.192/32', 'metadata'],
  ['168.63.129.16/32', 'metadata'],
  ['fd00:ec2::254/128', 'metadata'],
  ['fd00:ec2::253/128', 'metadata'],
  ['fd00:ec2::123/128', 'metadata'],
  ['fe80::a9fe:a9fe/128', 'metadata'],
]);

/** IPv4 blocked ranges, most specific first (IANA IPv4 Special-Purpose Address Registry). */
const V4_RANGES = ranges([
  ['0.0.0.0/32', 'unspecified'],
  ['0.0.0.0/8', 'reserved'],
  ['10.0.0.0/8', 'private'],
  ['100.64.0.0/10', 'cgnat'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local'],
  ['172.16.0.0/12', 'private'],
  ['192.0.0.0/24', 'reserved'],
  ['192.0.2.0/24', 'documentation'],
  ['192.88.99.0/24', 'reserved'],
  ['192.168.0.0/16', 'private'],
  ['198.18.0.0/15', 'benchmarking'],
  ['198.51.100.0/24', 'documentation'],
  ['203.0.113.0/24', 'documentation'],
  ['224.0.0.0/4', 'multicast'],
  ['255.255.255.255/32', 'broadcast'],
  ['240.0.0.0/4', 'reserved'],
]);

/** IPv6 blocked ranges, most specific first. Embedding prefixes (NAT64, 6to4, Teredo) are handled apart. */
const V6_RANGES = ranges([
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['64:ff9b:1::/48', 'nat64'],
  ['100::/64', 'reserved'],
  ['2001:2::/48', 'benchmarking'],
  ['2001::/23', 'reserved'],
  ['2001:db8::/32', 'documentation'],
  ['3fff::/20', 'documentation'],
  ['5f00::/16', 'reserved'],
  ['fc00::/7', 'unique-local'],
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'site-local'],
  ['ff00::/8', 'multicast'],
]);

const NAT64 = must('64:ff9b::/96');
const SIX_TO_FOUR = must('2002::/16');
const TEREDO = must('2001::/32');
const GLOBAL_UNICAST = must('2000::/3');
const MAPPED = must('::ffff:0:0/96');
const COMPATIBLE = must('::/96');
/** `::` and `::1` lie inside `::/96` but are named on their own. */
const LOW = must('::/127');

function must(block: string): Cidr {
  const cidr = parseCidr(block);
  if (cidr === null) throw new Error(`bad built-in range ${block}`);
  return cidr;
}

/** Why an address is blocked: the range name and, for translation prefixes, the IPv4 address inside. */
export interface Classification {
  /** Range name, e.g. `loopback`, `metadata`, `nat64`. */
  range: string;
  /** Set for `nat64`, `6to4`, `teredo`, `ipv4-mapped`, `ipv4-compatible` when the IPv4 address inside is
   * itself blocked: that address and its own range. */
  embedded?: { ip: string; range: string };
  /** True when this is, or embeds, a cloud metadata address (never exempted by allowed CIDRs). */
  metadata: boolean;
}

interface BlockedV4 {
  ip: string;
  range: string;
  metadata: boolean;
}

/**
 * Classifies a parsed address; null when it is public (globally reachable unicast).
 * See {@link classifyAddress} for the rules.
 */
export function classifyParsed(ip: ParsedIp): Classification | null {
  for (const { cidr, name } of METADATA) {
    if (cidrContains(cidr, ip)) return { range: name, metadata: true };
  }
  if (ip.family === 4) {
    for (const { cidr, name } of V4_RANGES) {
      if (cidrContains(cidr, ip)) return { range: name, metadata: false };
    }
    return null;
  }
  /** The IPv4 address at `offset` (bit-inverted for Teredo's client field), if it is blocked. */
  const embedded = (offset: number, invert: boolean): BlockedV4 | null => {
    const v4 = ip.bytes.slice(offset, offset + 4).map((byte) => (invert ? ~byte & 0xff : byte));
    const inner = classifyParsed({ family: 4, bytes: v4 });
    return inner === null ? null : { ip: formatIPv4(v4), range: inner.range, metadata: inner.metadata };
  };
  // Translation prefixes: blocked when an IPv4 address inside is blocked.
  const translated = (range: string, ...inner: (BlockedV4 | null)[]): Classification | null => {
    const found = inner.find((candidate) => candidate !== null);
    if (found === undefined || found === null) return null;
    return { range, embedded: { ip: found.ip, range: found.range }, metadata: found.metadata };
  };
  if (cidrContains(NAT64, ip)) return translated('nat64', embedded(12, false));
  if (cidrContains(SIX_TO_FOUR, ip)) return translated('6to4', embedded(2, false));
  // RFC 4380 §4: server IPv4 in bits 32–63, client IPv4 in the last 32 bits, inverted.
  if (cidrContains(TEREDO, ip)) return translated('teredo', embedded(12, true), embedded(4, false));
  // IPv4-mapped and -compatible forms are always refused; the embedded address is kept for the message.
  for (const [cidr, range] of [
    [MAPPED, 'ipv4-mapped'],
    [COMPATIBLE, 'ipv4-compatible'],
  ] as const) {
    if (cidrContains(cidr, ip) && !cidrContains(LOW, ip)) {
      return translated(range, embedded(12, false)) ?? { range, metadata: false };
    }
  }
  for (const { cidr, name } of V6_RANGES) {
    if (cidrContains(cidr, ip)) return { range: name, metadata: false };
  }
  if (!cidrContains(GLOBAL_UNICAST, ip)) return { range: 'reserved', metadata: false };
  return null;
}

/**
 * Pure address classifier (docs/decisions/0020-security-promises.md): returns null when `ip` is a public address
 * parley may connect to, or the name of the blocked range it falls in:
 * `loopback`, `private`, `link-local`, `cgnat`, `multicast`, `broadcast`, `reserved`, `unspecified`,
 * `documentation`, `benchmarking`, `metadata` (cloud metadata endpoints, checked first), `ipv4-mapped`
 * (every `::ffff:0:0/96` address, whatever it embeds), `ipv4-compatible`, `unique-local`, `site-local`,
 * and `nat64` / `6to4` / `teredo` when the IPv4 address they embed is itself blocked (the local-use NAT64
 * prefix `64:ff9b:1::/48` is always `nat64`). IPv6 outside `2000::/3` that no other rule names is `reserved`.
 *
 * @param ip an IP literal without brackets (`127.0.0.1`, `::1`, `fe80::1%eth0`).
 * @throws TypeError when `ip` is not an IP literal (a hostname or an odd IPv4 form such as `2130706433`:
 *   those must be normalised by the URL parser or resolved first).
 */
export function classifyAddress(ip: string): string | null {
  const parsed = parseIp(ip);
  if (parsed === null) throw new TypeError(`not an IP address: ${ip}`);
  return classifyParsed(parsed)?.range ?? null;
}

/**
 * The host of `url` as an address literal or a name: the WHATWG parser keeps an IPv6 literal's brackets in
 * `hostname` (`[::1]`), which `net.isIP`, DNS and address checks do not take (RFC 3986, section 3.2.2).
 */
export function hostnameOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}
