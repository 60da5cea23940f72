import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import { type RequestSignal, Withdrawal } from '../domain/withdrawal.ts';
import { AddressPolicy, type ResolvedAddress } from './address-policy.ts';
import { type ChannelPlace, closesConnection, type OutboundChannel } from './outbound-channel.ts';
import { OutboundError, toOutboundError } from './outbound-errors.ts';
import { abortable, pinnedConnector, readCapped } from './outbound-io.ts';
import { ClientPool, type PooledClient, poolKey } from './outbound-pool.ts';

export type { ResolvedAddress } from './address-policy.ts';
export { classifyAddress } from './addresses.ts';
export { type ChannelPlace, OutboundChannel } from './outbound-channel.ts';
export { OutboundError, type OutboundFailure } from './outbound-errors.ts';

/** Options of an {@link OutboundGuard}. */
export interface OutboundGuardOptions {
  /**
   * CIDRs (`a.b.c.d/n`, `x:y::/n`) whose addresses are exempt from the block: receivers on the operator's
   * own network (`WEBHOOK_ALLOWED_CIDRS`, docs/decisions/0020-security-promises.md). Cloud metadata addresses stay
   * refused even inside an allowed CIDR. An IPv4 block does not cover the IPv4-mapped IPv6 form of its addresses.
   */
  allowedCidrs: readonly string[];
  /** Extra trusted CA certificate(s), PEM, added to Node's bundled roots (tests trust a self-signed cert). */
  ca?: string | Buffer;
  /**
   * DNS lookup override for tests: every address the hostname resolves to. Default: `dns.lookup` with
   * `all: true` and the resolver's own order.
   */
  lookup?: (hostname: string) => Promise<ResolvedAddress[]>;
}

/**
 * One outbound HTTP request (media fetch: docs/decisions/0017-messages-and-media.md; webhook delivery:
 * docs/decisions/0005-outbox-and-delivery.md).
 */
export interface OutboundRequest {
  method: 'GET' | 'POST';
  /** Request headers; `host` and `content-length` are set by the client. */
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Total time allowed for DNS, connect, TLS, headers and body, milliseconds (> 0). */
  timeoutMs: number;
  /** Cap on response body bytes (integer ≥ 0). */
  maxResponseBytes: number;
  /**
   * `truncate`: keep the first `maxResponseBytes` bytes, set `truncated`, stop reading (webhook attempt log,
   * docs/decisions/0005-outbox-and-delivery.md). `error`: abort the stream and throw `OutboundError('too-large')` as
   * soon as the cap is passed, or at once when `content-length` announces more (media fetch,
   * docs/decisions/0017-messages-and-media.md).
   */
  onTooLarge: 'truncate' | 'error';
  /**
   * Requests that must reach the receiver in the order they were issued (a webhook lane's window,
   * docs/decisions/0058-pipelined-lanes.md): written after the channel's request before it, on its connection,
   * pipelined. Without it a request has a pooled connection to itself.
   */
  channel?: OutboundChannel;
  /**
   * Most time from the call to the end of the answer, milliseconds (a number; 0 or less times out at once): the
   * bound `timeoutMs` never runs past, also when a channel's request counts its time from the answer before it. A
   * webhook lane gives the time its claim has left before it could go stale
   * (docs/decisions/0058-pipelined-lanes.md). Default: no bound beyond `timeoutMs`.
   */
  endWithinMs?: number;
}

/** The answer to an {@link OutboundRequest}. A 3xx is returned as-is: redirects are never followed. */
export interface OutboundResponse {
  status: number;
  /** Response headers, names lowercased; repeated headers joined with `, `. */
  headers: Record<string, string>;
  /** Body bytes, at most `maxResponseBytes`. */
  body: Buffer;
  /** True when the server sent more than `maxResponseBytes` (truncate mode only). */
  truncated: boolean;
  /** Time from the call to the end of the body, milliseconds (rounded). */
  durationMs: number;
  /** The pinned IP actually connected to. */
  address: string;
}

/** Longest URL accepted, characters. */
const MAX_URL_LENGTH = 4096;

/**
 * The one way parley makes outbound HTTPS requests (webhooks, media fetches):
 * docs/decisions/0020-security-promises.md.
 *
 * - `https:` only, no userinfo; the URL parser's normalisation of odd IPv4 forms (`https://2130706433/`,
 *   `0x7f.1`) happens first, so literals are checked as the address they really are.
 * - The hostname is resolved once per request and **every** address it resolves to is checked: if any one
 *   is blocked the request is refused, so a hostname cannot mix a public and a private answer and hope the
 *   connection picks the private one. The connection goes to exactly those checked addresses (tried in
 *   resolver order, the remaining time split between them); nothing resolves the name a second time, so DNS
 *   rebinding between check and connect is impossible. TLS still verifies the certificate against the
 *   hostname (SNI and identity check use the hostname, not the IP).
 * - Each request is resolved, checked and pinned anew; it reuses a pooled connection only to the same checked
 *   addresses (`outbound-pool.ts`).
 * - Redirects are not followed; the timeout covers the whole exchange; the body is capped while streaming.
 */
export class OutboundGuard {
  /** Which addresses a request may connect to (`address-policy.ts`). */
  readonly #policy: AddressPolicy;
  /**
   * TLS context with the extra CA, built once: making one per connection re-parses every bundled root
   * certificate (about 24 ms of CPU per webhook attempt, measured by `npm run bench`).
   */
  readonly #secureContext: SecureContext | undefined;
  /** Keep-alive connections by origin and checked addresses (`outbound-pool.ts`). */
  readonly #pool: ClientPool;
  #closed = false;

  /** @throws TypeError when an entry of `allowedCidrs` is not a CIDR. */
  constructor(options: OutboundGuardOptions) {
    this.#policy = new AddressPolicy(options.allowedCidrs, options.lookup);
    this.#secureContext =
      options.ca === undefined
        ? undefined
        : createSecureContext({
            ca: [
              ...rootCertificates,
              typeof options.ca === 'string' ? options.ca : options.ca.toString('utf8'),
            ],
          });
    const secureContext = this.#secureContext;
    this.#pool = new ClientPool((url, addresses, timeoutMs, signal, pinned) =>
      pinnedConnector(url, addresses, timeoutMs, signal, pinned, secureContext),
    );
  }

  /**
   * URL shape check only (synchronous, no DNS): parses `raw` with the WHATWG URL parser and requires
   * `https:`, a host, no username/password, at most 4,096 characters (docs/decisions/0020-security-promises.md,
   * docs/decisions/0001-envelope-and-error-codes.md `webhookUrl must be an HTTPS URL`).
   * @throws OutboundError `invalid-url` (unparseable, userinfo, too long) or `scheme` (not https).
   */
  parseUrl(raw: string): URL {
    if (raw.length > MAX_URL_LENGTH) {
      const text = `URL is longer than ${MAX_URL_LENGTH} characters`;
      throw new OutboundError('invalid-url', text, { publicMessage: text });
    }
    let url: URL;
    try {
      url = new URL(raw);
    } catch (cause) {
      throw new OutboundError('invalid-url', 'URL is not valid', {
        cause,
        publicMessage: 'URL is not valid',
      });
    }
    if (url.protocol !== 'https:') {
      throw new OutboundError('scheme', `URL must use https (got ${url.protocol.replace(/:$/, '')})`);
    }
    if (url.username !== '' || url.password !== '') {
      const text = 'URL must not contain a username or password';
      throw new OutboundError('invalid-url', text, { publicMessage: text });
    }
    if (url.hostname === '') {
      throw new OutboundError('invalid-url', 'URL has no host', { publicMessage: 'URL has no host' });
    }
    return url;
  }

  /**
   * Resolves the URL's host and checks every address it resolves to (docs/decisions/0020-security-promises.md, at
   * configuration time: `POST /v1/webhook`). Returns the address a request would connect to first.
   * @param timeoutMs time allowed for the lookup, milliseconds (default 10,000).
   * @throws OutboundError `scheme`/`invalid-url` (URL shape), `dns` (no address), `blocked-address`,
   *   `timeout` (lookup too slow).
   */
  async checkHost(url: URL, timeoutMs = 10_000): Promise<string> {
    const checked = this.parseUrl(url.href);
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new OutboundError('timeout', `resolving ${checked.hostname} timed out`)),
      timeoutMs,
    );
    try {
      const [first] = await this.#policy.resolve(checked, controller.signal);
      if (first === undefined) throw new OutboundError('dns', `host ${checked.hostname} has no address`);
      return first;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Resolves `hostname` (a name or an address literal, IPv6 without brackets) and checks every address it resolves
   * to, for a connection that is not an HTTPS request: a broker endpoint's TCP connection
   * (docs/decisions/0037-broker-endpoints.md) dials exactly the addresses returned, in order, so the checks of
   * docs/decisions/0020-security-promises.md apply to it as to a webhook.
   * @param timeoutMs time allowed for the lookup, milliseconds (default 10,000).
   * @returns the checked addresses, at least one.
   * @throws OutboundError `dns` (no address), `blocked-address`, `timeout` (lookup too slow).
   */
  async checkedAddresses(hostname: string, timeoutMs = 10_000): Promise<string[]> {
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new OutboundError('timeout', `resolving ${hostname} timed out`)),
      timeoutMs,
    );
    try {
      const host = isIP(hostname) === 6 ? `[${hostname}]` : hostname;
      return await this.#policy.resolve(new URL(`https://${host}/`), controller.signal);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * One request through the guard (docs/decisions/0017-messages-and-media.md,
   * docs/decisions/0005-outbox-and-delivery.md, docs/decisions/0020-security-promises.md): resolves, checks and pins
   * the address for this connection (TLS servername stays the hostname), never follows redirects (a 3xx is returned
   * as-is), enforces `timeoutMs` over the whole exchange and `maxResponseBytes` while streaming. With
   * `request.channel` the request is written on the channel's connection after the channel's request before it
   * (docs/decisions/0058-pipelined-lanes.md).
   * @throws OutboundError with the failure's reason: `invalid-url`, `scheme`, `blocked-address`, `dns`,
   *   `timeout`, `too-large` (error mode), `connect`, `tls`, `protocol`.
   * @throws TypeError for a bad `timeoutMs`/`maxResponseBytes`/`endWithinMs`; Error when the guard is closed.
   */
  async request(url: string | URL, request: OutboundRequest): Promise<OutboundResponse> {
    if (this.#closed) throw new Error('OutboundGuard is closed');
    if (!(Number.isFinite(request.timeoutMs) && request.timeoutMs > 0)) {
      throw new TypeError('timeoutMs must be a positive number of milliseconds');
    }
    if (!(Number.isSafeInteger(request.maxResponseBytes) && request.maxResponseBytes >= 0)) {
      throw new TypeError('maxResponseBytes must be a non-negative integer');
    }
    if (request.endWithinMs !== undefined && Number.isNaN(request.endWithinMs)) {
      throw new TypeError('endWithinMs must be a number of milliseconds');
    }
    const target = this.parseUrl(typeof url === 'string' ? url : url.href);
    const started = performance.now();
    // The request's deadline: a plain signal, not an `AbortController` (its `EventTarget` was about 2 % of a delivery
    // burst's main thread, docs/benchmarks.md step 88).
    const deadline = new Withdrawal();
    // Made only when the timer fires: an error's stack capture was 2 % of a delivery burst's CPU.
    const timedOut = () =>
      new OutboundError('timeout', `request to ${target.host} timed out after ${request.timeoutMs} ms`);
    const { channel } = request;
    let pooled: PooledClient | undefined;
    let place: ChannelPlace | undefined;
    let ended = false;
    const onTimeout = () => {
      // A channel's connection is closed first, failing the requests written behind this one: aborting this one
      // alone would close it too, and undici would write all of them again on a new connection.
      if (channel !== undefined && pooled !== undefined) {
        channel.discard(
          pooled,
          new OutboundError(
            'connect',
            `request to ${target.host} failed: an earlier request on its connection timed out`,
          ),
        );
      }
      deadline.withdraw(timedOut());
    };
    /** The time-out to arm now: `timeoutMs`, cut to what is left of `endWithinMs` since the call. */
    const timeLeft = () =>
      request.endWithinMs === undefined
        ? request.timeoutMs
        : Math.max(0, Math.min(request.timeoutMs, request.endWithinMs - (performance.now() - started)));
    let timer = setTimeout(onTimeout, timeLeft());
    // Taken before the first wait: a channel's requests are written in the order of these calls.
    const turn = channel?.enter();
    let reusable = false;
    try {
      const addresses = await this.#policy.resolve(target, deadline);
      if (turn !== undefined) await abortable(turn.ready, deadline);
      if (this.#closed) throw new Error('OutboundGuard is closed');
      if (channel === undefined) pooled = this.#pool.checkout(target, addresses, request.timeoutMs);
      else {
        place = channel.acquire(
          poolKey(target, addresses),
          () => this.#pool.checkout(target, addresses, request.timeoutMs),
          (entry, ok) => this.#pool.checkin(entry, ok && !this.#closed),
        );
        pooled = place.pooled;
        // Behind unanswered requests on its connection, a request's time counts from the end of the last of them,
        // when its answer is the next the receiver owes: a receiver answering one request after the other gives it
        // the time one request at a time would have. Each request ahead is bounded by its own time, and one that
        // runs out closes the connection under this one. Never past `endWithinMs`: a webhook request must end before
        // its claim can go stale (docs/decisions/0058-pipelined-lanes.md).
        if (place.ahead !== undefined) {
          clearTimeout(timer);
          place.ahead.then(() => {
            if (ended || deadline.aborted) return;
            timer = setTimeout(onTimeout, timeLeft());
          });
        }
      }
      const responding = pooled.client.request({
        path: `${target.pathname}${target.search}`,
        method: request.method,
        headers: request.headers ?? {},
        body: request.body ?? null,
        // undici takes any signal with `aborted`, `reason`, `addEventListener` and `removeEventListener`
        // (lib/api/api-request.js, lib/api/abort-signal.js); its types name `AbortSignal` or `EventEmitter` only.
        signal: deadline as RequestSignal as AbortSignal,
        // On a channel's connection the next request is written before this one is answered. undici does so
        // only for a request it may send again after a lost connection (a webhook attempt may: receivers
        // deduplicate by its id) and that is not marked as holding the pipeline until its answer's head.
        ...(channel === undefined ? {} : { idempotent: true, blocking: false }),
      });
      turn?.pass();
      const response = await responding;
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(response.headers)) {
        if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
      }
      const keepsAlive = !closesConnection(headers);
      this.#pool.learn(pooled, keepsAlive);
      if (place !== undefined) channel?.answered(place, keepsAlive);
      // On a channel's connection the rest of a long answer is read and dropped: cutting it off would close the
      // connection under the requests written behind it, and undici would write them all again.
      const { body, truncated, drained } = await readCapped(
        response.body,
        headers,
        request,
        target,
        channel !== undefined,
      );
      // A body read to its end leaves the connection reusable; a cut-off one is closed with the client. On a
      // channel's connection an answer whose dropped rest could not be read in time keeps its status (the answer
      // was given) and closes the connection, failing the requests written behind it.
      if (channel === undefined) reusable = !truncated;
      else {
        reusable = drained;
        if (!drained) {
          channel.discard(
            pooled,
            new OutboundError(
              'connect',
              `request to ${target.host} failed: an earlier answer on its connection was not read to its end`,
            ),
          );
        }
      }
      return {
        status: response.statusCode,
        headers,
        body,
        truncated,
        durationMs: Math.round(performance.now() - started),
        address: pooled.pinned.address,
      };
    } catch (error) {
      if (deadline.aborted) {
        const reason: unknown = deadline.reason;
        throw reason instanceof OutboundError ? reason : timedOut();
      }
      if (this.#closed && !(error instanceof OutboundError)) {
        throw new OutboundError('connect', 'request cancelled: outbound guard closed', { cause: error });
      }
      throw toOutboundError(error, target.host);
    } finally {
      ended = true;
      turn?.pass();
      clearTimeout(timer);
      if (place !== undefined) channel?.release(place, reusable);
      else if (pooled !== undefined) this.#pool.checkin(pooled, reusable && !this.#closed);
    }
  }

  /** Cancels requests in flight (they reject with OutboundError `connect`) and refuses new ones. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#pool.close();
  }

  /** Idle pooled connections (tests). */
  get idleConnections(): number {
    return this.#pool.idle;
  }
}
