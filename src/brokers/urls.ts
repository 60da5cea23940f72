import { hostnameOf } from '../net/addresses.ts';

/**
 * Broker endpoint URLs (docs/decisions/0037-broker-endpoints.md): which URLs name a broker, what they mean, and the
 * masked form shown by the API and written to the attempts log.
 *
 * - `amqp://` and `amqps://` (RabbitMQ, the RabbitMQ URI specification): `user:password@host:port/vhost`, port
 *   5672 / 5671, the vhost is the percent-decoded path without its first `/` (none: `/`), and one query parameter,
 *   `exchange` (default `parley`).
 * - `nats://` (NATS with JetStream): `user:password@host:port` or `token@host:port`, port 4222, no path or query.
 */

/** Longest endpoint URL accepted, characters (as the outbound guard's limit for HTTPS URLs). */
const MAX_URL_LENGTH = 4096;

/** What replaces a password or token in the URL the API shows. */
export const MASK = '****';

/** The exchange an `amqp(s)://` endpoint publishes to when its URL names none. */
export const DEFAULT_EXCHANGE = 'parley';

/** RabbitMQ exchange names: at most 255 of these characters (RabbitMQ's AMQP 0-9-1 reference, `exchange-name`). */
const EXCHANGE_NAME = /^[A-Za-z0-9_.:-]{1,255}$/;

/** A RabbitMQ endpoint: where to connect and which exchange takes the messages. */
export interface AmqpTarget {
  kind: 'amqp';
  /** True for `amqps://` (TLS, the certificate checked against `hostname`). */
  tls: boolean;
  /** Host name or address literal (IPv6 without brackets). */
  hostname: string;
  port: number;
  /** Login; RabbitMQ's `guest`/`guest` when the URL gives none. */
  username: string;
  password: string;
  vhost: string;
  /** A durable topic exchange (declared when missing, except RabbitMQ's own `amq.` ones, which are only checked). */
  exchange: string;
}

/** A NATS JetStream endpoint: where to connect and with which credentials. */
export interface NatsTarget {
  kind: 'nats';
  hostname: string;
  port: number;
  /** User and password, or a lone token: at most one of the two forms. */
  user?: string | undefined;
  pass?: string | undefined;
  token?: string | undefined;
}

/** A broker endpoint's destination. */
export type BrokerTarget = AmqpTarget | NatsTarget;

/** A parsed broker URL: the target, and the URL as shown (password or token masked). */
export interface ParsedBrokerUrl {
  target: BrokerTarget;
  /** The URL with its password or token replaced by {@link MASK}; equal to the normalised URL when it has none. */
  masked: string;
  /** True when the URL carries a password or token (it is then stored sealed). */
  hasSecret: boolean;
}

/** A broker URL that cannot be used; `message` is safe to answer. */
export class BrokerUrlError extends Error {
  override readonly name = 'BrokerUrlError';
}

/** True when `raw` starts with a broker scheme (`amqp:`, `amqps:`, `nats:`), whatever follows. */
export function isBrokerUrl(raw: string): boolean {
  return /^(amqps?|nats):/i.test(raw.trimStart());
}

/** Percent-decodes a URL part, or throws {@link BrokerUrlError} naming `what`. */
function decode(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new BrokerUrlError(`URL ${what} is not valid percent-encoding`);
  }
}

/** The port of `url`, or `fallback` when it names none. */
function portOf(url: URL, fallback: number): number {
  return url.port === '' ? fallback : Number(url.port);
}

/** The host of `url` without IPv6 brackets. */
function hostOf(url: URL): string {
  if (url.hostname === '') throw new BrokerUrlError('URL has no host');
  return hostnameOf(url);
}

/**
 * Parses a broker endpoint URL (rules in the module doc).
 * @throws BrokerUrlError with an answerable message: not a URL, too long, not a broker scheme, no host, a bad vhost
 *   or exchange, an unknown query parameter, a path or query on `nats://`, a password without a user.
 */
export function parseBrokerUrl(raw: string): ParsedBrokerUrl {
  if (raw.length > MAX_URL_LENGTH)
    throw new BrokerUrlError(`URL is longer than ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new BrokerUrlError('URL is not valid');
  }
  const scheme = url.protocol.replace(/:$/, '');
  if (url.hash !== '') throw new BrokerUrlError('URL must not have a fragment');
  if (scheme === 'amqp' || scheme === 'amqps') return parseAmqp(url, scheme === 'amqps');
  if (scheme === 'nats') return parseNats(url);
  throw new BrokerUrlError(`URL scheme must be amqp, amqps or nats (got ${scheme})`);
}

function parseAmqp(url: URL, tls: boolean): ParsedBrokerUrl {
  const hostname = hostOf(url);
  for (const key of url.searchParams.keys()) {
    if (key !== 'exchange')
      throw new BrokerUrlError(`URL query parameter ${key} is not supported (only exchange)`);
  }
  const exchange = url.searchParams.get('exchange') ?? DEFAULT_EXCHANGE;
  if (!EXCHANGE_NAME.test(exchange)) {
    throw new BrokerUrlError(
      'URL exchange must be 1 to 255 letters, digits, hyphens, underscores, periods or colons',
    );
  }
  const rawVhost = url.pathname.slice(1);
  if (rawVhost.includes('/')) throw new BrokerUrlError('URL vhost must be one path segment (write / as %2F)');
  // `amqp://host` and `amqp://host/` both mean the default vhost `/`.
  const vhost = rawVhost === '' ? '/' : decode(rawVhost, 'vhost');
  const username = decode(url.username, 'user');
  const password = decode(url.password, 'password');
  if (password !== '' && username === '') throw new BrokerUrlError('URL has a password but no user');
  const target: AmqpTarget = {
    kind: 'amqp',
    tls,
    hostname,
    port: portOf(url, tls ? 5671 : 5672),
    username: username === '' ? 'guest' : username,
    password: username === '' ? 'guest' : password,
    vhost,
    exchange,
  };
  return { target, ...masked(url, password !== '') };
}

function parseNats(url: URL): ParsedBrokerUrl {
  const hostname = hostOf(url);
  if (url.pathname !== '' && url.pathname !== '/') throw new BrokerUrlError('nats URL must not have a path');
  if (url.search !== '') throw new BrokerUrlError('nats URL must not have a query');
  const user = decode(url.username, 'user');
  const pass = decode(url.password, 'password');
  if (pass !== '' && user === '') throw new BrokerUrlError('URL has a password but no user');
  const port = portOf(url, 4222);
  if (user === '') return { target: { kind: 'nats', hostname, port }, masked: url.href, hasSecret: false };
  if (pass === '') {
    // A lone user part is a token (the NATS URL convention).
    const shown = new URL(url.href);
    shown.username = MASK;
    return { target: { kind: 'nats', hostname, port, token: user }, masked: shown.href, hasSecret: true };
  }
  return { target: { kind: 'nats', hostname, port, user, pass }, ...masked(url, true) };
}

/** `url` with its password masked when it has one. */
function masked(url: URL, hasSecret: boolean): { masked: string; hasSecret: boolean } {
  if (!hasSecret) return { masked: url.href, hasSecret };
  const shown = new URL(url.href);
  shown.password = MASK;
  return { masked: shown.href, hasSecret };
}

/**
 * Which secret of a parsed broker URL is exactly {@link MASK}: its password (`amqp://user:****@…`,
 * `nats://user:****@…`), its NATS token (`nats://****@…`), or none. Such a URL is one the API showed, sent back: the
 * mask is not the secret (docs/decisions/0037-broker-endpoints.md "Credentials").
 */
export function maskedSecret(target: BrokerTarget): 'password' | 'token' | undefined {
  if (target.kind === 'amqp') return target.password === MASK ? 'password' : undefined;
  if (target.pass === MASK) return 'password';
  return target.token === MASK ? 'token' : undefined;
}

/**
 * `submitted`, a broker URL whose `secret` is {@link MASK} ({@link maskedSecret}), with the secret of `stored` (the
 * whole URL kept sealed) in the mask's place, when both name the same login on the same server: the same scheme
 * (`amqps://` stays TLS), host, port and, for a password, user, and `stored` has a secret of the same form. Any other
 * part (the vhost, the exchange, how the URL is written) may differ. Carrying the secret to another server, scheme
 * or user would hand it to whoever the URL now names, unasked: undefined then, and the caller asks for the secret
 * (docs/decisions/0037-broker-endpoints.md "Credentials").
 * @throws BrokerUrlError when `submitted` is not a valid broker URL (`stored` is one: it was checked when stored).
 */
export function withStoredSecret(
  submitted: string,
  stored: string,
  secret: 'password' | 'token',
): string | undefined {
  const mine = parseBrokerUrl(submitted).target;
  const theirs = parseBrokerUrl(stored).target;
  if (mine.hostname !== theirs.hostname || mine.port !== theirs.port) return undefined;
  const from = new URL(stored);
  const url = new URL(submitted);
  if (mine.kind === 'amqp' && theirs.kind === 'amqp') {
    if (mine.tls !== theirs.tls || mine.username !== theirs.username || from.password === '')
      return undefined;
    url.password = from.password;
    return url.href;
  }
  if (mine.kind !== 'nats' || theirs.kind !== 'nats') return undefined;
  if (secret === 'token') {
    if (theirs.token === undefined) return undefined;
    url.username = from.username;
    return url.href;
  }
  if (theirs.pass === undefined || mine.user !== theirs.user) return undefined;
  url.password = from.password;
  return url.href;
}

/**
 * The routing key (RabbitMQ) or subject (NATS) of an event: `parley.<instanceId>.<Type>`
 * (docs/decisions/0037-broker-endpoints.md). Instance ids are UUIDs and types are single words, so neither adds a
 * level.
 */
export function brokerSubject(instanceId: string, type: string): string {
  return `parley.${instanceId}.${type}`;
}
