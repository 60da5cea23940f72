import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { RequestSignal } from '../domain/withdrawal.ts';
import { type Cidr, cidrContains, classifyParsed, hostnameOf, parseCidr, parseIp } from './addresses.ts';
import { OutboundError } from './outbound-errors.ts';
import { abortable } from './outbound-io.ts';

/** One resolved address, as `dns.lookup({ all: true })` returns it. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** The system resolver: every address of `hostname`, in its own order. */
async function systemLookup(hostname: string): Promise<ResolvedAddress[]> {
  const results = await dnsLookup(hostname, { all: true, verbatim: true });
  return results.map((result) => ({ address: result.address, family: result.family === 6 ? 6 : 4 }));
}

/**
 * Which addresses the outbound guard may connect to (docs/decisions/0020-security-promises.md): a name is resolved
 * once and **every** address it resolves to is checked, so a name cannot mix a public and a private answer; an
 * address in a blocked range (`addresses.ts`) is refused unless one of the operator's allowed CIDRs covers it, and a
 * cloud metadata address is refused always.
 */
export class AddressPolicy {
  readonly #allowed: Cidr[];
  readonly #lookup: (hostname: string) => Promise<ResolvedAddress[]>;

  /**
   * @param allowedCidrs CIDRs (`a.b.c.d/n`, `x:y::/n`) exempt from the block (`WEBHOOK_ALLOWED_CIDRS`).
   * @param lookup every address a hostname resolves to (default: `dns.lookup` with `all: true`).
   * @throws TypeError when an entry of `allowedCidrs` is not a CIDR.
   */
  constructor(
    allowedCidrs: readonly string[],
    lookup: (hostname: string) => Promise<ResolvedAddress[]> = systemLookup,
  ) {
    this.#allowed = allowedCidrs.map((text) => {
      const cidr = parseCidr(text.trim());
      if (cidr === null) throw new TypeError(`allowed CIDR "${text}" is not a CIDR (a.b.c.d/n or x:y::/n)`);
      return cidr;
    });
    this.#lookup = lookup;
  }

  /**
   * The URL host's address literal, or every address its name resolves to, each checked (the class's rules).
   * @returns the checked addresses, at least one, in the resolver's order.
   * @throws OutboundError `dns` (unresolvable, no address, not an address), `blocked-address`; the signal's reason
   *   once it is aborted.
   */
  async resolve(url: URL, signal: RequestSignal): Promise<string[]> {
    const hostname = hostnameOf(url);
    if (isIP(hostname) !== 0) {
      this.#assertAllowed(hostname, `address ${hostname}`);
      return [hostname];
    }
    let results: ResolvedAddress[];
    try {
      results = await abortable(this.#lookup(hostname), signal);
    } catch (cause) {
      if (signal.aborted) throw signal.reason;
      const code = errorCode(cause);
      throw new OutboundError(
        'dns',
        `host ${hostname} could not be resolved${code === undefined ? '' : ` (${code})`}`,
        { cause },
      );
    }
    const addresses = [...new Set(results.map((result) => result.address))];
    if (addresses.length === 0) throw new OutboundError('dns', `host ${hostname} has no address`);
    for (const address of addresses) {
      if (isIP(address) === 0) {
        throw new OutboundError('dns', `host ${hostname} resolved to something that is not an address`);
      }
      this.#assertAllowed(address, `host ${hostname} resolves to ${address}, which`);
    }
    return addresses;
  }

  /**
   * Refuses a blocked address unless an allowed CIDR covers it (never a metadata address). `subject` starts the
   * error's text (`address 10.0.0.1`, `host x resolves to 10.0.0.1, which`).
   * @throws OutboundError `dns` (not an IP address) or `blocked-address`.
   */
  #assertAllowed(address: string, subject: string): void {
    const parsed = parseIp(address);
    if (parsed === null) throw new OutboundError('dns', `${subject} is not an IP address`);
    const blocked = classifyParsed(parsed);
    if (blocked === null) return;
    if (!blocked.metadata && this.#allowed.some((cidr) => cidrContains(cidr, parsed))) return;
    const detail =
      blocked.embedded === undefined
        ? blocked.range
        : `${blocked.range} embedding ${blocked.embedded.ip}: ${blocked.embedded.range}`;
    throw new OutboundError('blocked-address', `${subject} is not allowed (${detail})`);
  }
}

function errorCode(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string') {
    return error.code;
  }
  return undefined;
}
