import { isIPv4, isIPv6 } from 'node:net';
import type { Redis } from 'ioredis';
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from 'rate-limiter-flexible';
import type { Clock } from '../domain/clock.ts';

/**
 * How dashboard sign-ins are slowed (docs/decisions/0015-edge-hardening.md, docs/dashboard.md "Signing in"):
 * per account a growing wait between password checks, per client address a count of password checks per window.
 */
export interface SignInLimits {
  /** Password checks per account allowed back to back before waits start (default 3). */
  freeAttempts: number;
  /** Wait after the first attempt past the free ones, ms; doubles with each further attempt (default 1,000). */
  baseDelayMs: number;
  /** Longest wait between two password checks of one account, ms (default 30,000). */
  maxDelayMs: number;
  /** Quiet time after which an account's attempts are forgotten, ms (default 3,600,000: one hour). */
  forgetAfterMs: number;
  /** Password checks per client IP address per window; a successful sign-in gives its check back (default 30). */
  perAddress: number;
  /** Length of the address window, seconds (default 900: 15 minutes). */
  windowSeconds: number;
}

/**
 * The defaults of {@link SignInLimits} (OWASP Authentication Cheat Sheet: throttle per account and per source,
 * prefer growing delays to lockouts an attacker can trigger against the owner).
 */
export const SIGN_IN_LIMITS: SignInLimits = {
  freeAttempts: 3,
  baseDelayMs: 1_000,
  maxDelayMs: 30_000,
  forgetAfterMs: 3_600_000,
  perAddress: 30,
  windowSeconds: 900,
};

/** The answer to {@link SignInLimiter.claim}: the password may be checked now, or not for `retryAfter` seconds. */
export type SignInClaim = { allowed: true } | { allowed: false; retryAfter: number };

/** One account's gate: claims a password check atomically, or says how long to wait (ms). */
interface AccountGates {
  claim(key: string, now: number): Promise<{ allowed: boolean; waitMs: number }>;
  reset(key: string): Promise<void>;
}

/** The wait an account's `n`th claimed attempt imposes before the next one, ms (0 while within the free ones). */
export function delayAfter(n: number, limits: SignInLimits): number {
  if (n <= limits.freeAttempts) return 0;
  return Math.min(limits.baseDelayMs * 2 ** (n - limits.freeAttempts - 1), limits.maxDelayMs);
}

/** In-process gates: a map read and written synchronously, so two claims can never both see the gate open. */
class MemoryGates implements AccountGates {
  readonly #limits: SignInLimits;
  readonly #state = new Map<string, { attempts: number; nextAt: number; lastAt: number }>();
  #claims = 0;

  constructor(limits: SignInLimits) {
    this.#limits = limits;
  }

  async claim(key: string, now: number): Promise<{ allowed: boolean; waitMs: number }> {
    this.#claims += 1;
    if (this.#claims % 1000 === 0) this.#sweep(now);
    let state = this.#state.get(key);
    if (state && now - state.lastAt >= this.#limits.forgetAfterMs) state = undefined;
    if (state && now < state.nextAt) return { allowed: false, waitMs: state.nextAt - now };
    const attempts = (state?.attempts ?? 0) + 1;
    this.#state.set(key, { attempts, nextAt: now + delayAfter(attempts, this.#limits), lastAt: now });
    return { allowed: true, waitMs: 0 };
  }

  async reset(key: string): Promise<void> {
    this.#state.delete(key);
  }

  #sweep(now: number): void {
    for (const [key, state] of this.#state)
      if (now - state.lastAt >= this.#limits.forgetAfterMs) this.#state.delete(key);
  }
}

/**
 * The claim as one Lua script, so Redis runs the read, the test and the write atomically for every process:
 * KEYS[1] the account, ARGV now (epoch ms), free attempts, base delay, max delay, forget-after (ms). Returns
 * `{1, 0}` when claimed, `{0, waitMs}` when the gate is closed.
 */
const CLAIM_SCRIPT = `
local state = redis.call('HMGET', KEYS[1], 'n', 'next')
local now = tonumber(ARGV[1])
local n = tonumber(state[1]) or 0
local nextAt = tonumber(state[2]) or 0
if now < nextAt then return {0, nextAt - now} end
n = n + 1
local delay = 0
if n > tonumber(ARGV[2]) then
  delay = math.min(tonumber(ARGV[3]) * 2 ^ math.min(n - tonumber(ARGV[2]) - 1, 40), tonumber(ARGV[4]))
end
redis.call('HSET', KEYS[1], 'n', n, 'next', now + delay)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[5]))
return {1, 0}
`;

/** Gates in Redis, shared by every process; in-process gates stand in while Redis fails. */
class RedisGates implements AccountGates {
  readonly #redis: Redis;
  readonly #limits: SignInLimits;
  readonly #insurance: MemoryGates;

  constructor(redis: Redis, limits: SignInLimits) {
    this.#redis = redis;
    this.#limits = limits;
    this.#insurance = new MemoryGates(limits);
  }

  async claim(key: string, now: number): Promise<{ allowed: boolean; waitMs: number }> {
    const l = this.#limits;
    try {
      const [claimed, waitMs] = (await this.#redis.eval(
        CLAIM_SCRIPT,
        1,
        `parley:signin:gate:${key}`,
        now,
        l.freeAttempts,
        l.baseDelayMs,
        l.maxDelayMs,
        l.forgetAfterMs,
      )) as [number, number];
      return { allowed: claimed === 1, waitMs };
    } catch {
      return this.#insurance.claim(key, now);
    }
  }

  async reset(key: string): Promise<void> {
    await Promise.all([
      this.#redis.del(`parley:signin:gate:${key}`).catch(() => 0),
      this.#insurance.reset(key),
    ]);
  }
}

/**
 * Slows dashboard sign-ins without locking anyone out (docs/decisions/0015-edge-hardening.md). Every password
 * check is claimed BEFORE it runs, atomically (one Lua script on Redis, a synchronous map in-process), so a burst
 * of concurrent attempts cannot all slip past a check-then-count race:
 *
 * - per account (the e-mail as typed, known or not): {@link SignInLimits.freeAttempts} checks back to back, then
 *   each check closes the account's gate for a wait that doubles with each further attempt up to
 *   {@link SignInLimits.maxDelayMs}; attempts arriving while the gate is closed are refused without a check. A
 *   successful sign-in clears the account. There is no lockout: the owner gets in after at most the longest wait.
 * - per client address: {@link SignInLimits.perAddress} checks per window with `rate-limiter-flexible` (consumed
 *   before the check, given back on success and when the account's gate refuses).
 *
 * Counts live in Redis when a client is given (every process shares them), else in this process. The account
 * gates follow the injected clock; the address window follows the wall clock.
 */
export class SignInLimiter {
  readonly #gates: AccountGates;
  readonly #address: RateLimiterAbstract;
  readonly #clock: Clock;

  constructor(redis: Redis | undefined, options: { limits?: SignInLimits; clock?: Clock } = {}) {
    const limits = options.limits ?? SIGN_IN_LIMITS;
    this.#clock = options.clock ?? Date.now;
    this.#gates = redis ? new RedisGates(redis, limits) : new MemoryGates(limits);
    const keyPrefix = 'parley:signin:address';
    const points = limits.perAddress;
    const duration = limits.windowSeconds;
    this.#address = redis
      ? new RateLimiterRedis({
          storeClient: redis,
          points,
          duration,
          keyPrefix,
          insuranceLimiter: new RateLimiterMemory({ points, duration, keyPrefix }),
        })
      : new RateLimiterMemory({ points, duration, keyPrefix });
  }

  /**
   * Claims one password check for `email` from `address`, counting it against both before the password is
   * verified. Refused: `retryAfter` is the whole seconds (≥ 1) until the address window or the account's gate
   * opens. @throws only when the store fails without insurance.
   */
  async claim(email: string, address: string): Promise<SignInClaim> {
    const key = addressKey(address);
    try {
      await this.#address.consume(key, 1);
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      return { allowed: false, retryAfter: Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)) };
    }
    const gate = await this.#gates.claim(email, this.#clock());
    if (gate.allowed) return { allowed: true };
    await this.#address.reward(key, 1);
    return { allowed: false, retryAfter: Math.max(1, Math.ceil(gate.waitMs / 1000)) };
  }

  /** A claimed check succeeded: the account's attempts are cleared and the address gets its check back. */
  async succeeded(email: string, address: string): Promise<void> {
    await Promise.all([this.#gates.reset(email), this.#address.reward(addressKey(address), 1)]);
  }
}

/**
 * The key of the address window a client address counts in (docs/decisions/0015-edge-hardening.md): an IPv4 address
 * as it is, an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) as its IPv4 address, and any other IPv6 address as its
 * /64 prefix (`2001:db8:1:2::/64`), the block one subscriber is given (RFC 6177), so a client cannot get fresh
 * windows by changing the low bits of its address. Anything else (not an IP address) is its own key. Never throws.
 */
export function addressKey(address: string): string {
  if (isIPv4(address)) return address;
  if (!isIPv6(address)) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1] !== undefined) return mapped[1];
  const [head = '', tail = ''] = address.toLowerCase().split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = address.includes('::') ? (tail === '' ? [] : tail.split(':')) : [];
  // An embedded IPv4 tail takes two groups; only the first four groups matter for the prefix.
  const tailLength = tailGroups.reduce((n, group) => n + (group.includes('.') ? 2 : 1), 0);
  const missing = address.includes('::') ? 8 - headGroups.length - tailLength : 0;
  const groups = [...headGroups, ...Array<string>(Math.max(0, missing)).fill('0'), ...tailGroups];
  const prefix = groups.slice(0, 4).map((group) => Number.parseInt(group, 16).toString(16));
  return `${prefix.join(':')}::/64`;
}
