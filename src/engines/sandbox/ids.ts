import { createHmac, hash } from 'node:crypto';
import { GROUP_DOMAIN, type Jid } from '../../domain/messages.ts';
import type { AuthStateStore } from '../engine.ts';

/** Auth-port entry holding the next unreserved sequence number of an instance's sandbox world. */
const SEQUENCE = { category: 'sandbox-seq', id: 'next' } as const;
/** Sequence numbers reserved per store write (hi/lo allocation). */
export const SEQUENCE_BLOCK = 1000;

/**
 * SHA-256 of `parley-sandbox-ids:<instanceId>:<label>:<n>` as 64 lowercase hex characters. Uniqueness comes from
 * `n` (never reused per instance); the hash only spreads the bits into the platform's id shapes. Node's one-shot
 * `crypto.hash`, about a fifth of an HMAC object's cost: one runs at every sandbox send.
 */
function digest(instanceId: string, label: string, n: number): string {
  return hash('sha256', `parley-sandbox-ids:${instanceId}:${label}:${n}`, 'hex');
}

/**
 * Id of a message the account sends: `3EB0` + 18 uppercase hex characters (22 in all), the shape the
 * platform's web and multi-device clients use (docs/decisions/0017-messages-and-media.md). Deterministic for
 * `(instanceId, n)`.
 */
export function outgoingMessageId(instanceId: string, n: number): string {
  return `3EB0${digest(instanceId, 'out', n).slice(0, 18).toUpperCase()}`;
}

/**
 * Id of a message another (simulated) user sends: 32 uppercase hex characters, the shape of ids minted by the
 * platform's Android clients. Disjoint from {@link outgoingMessageId} (different length).
 */
export function incomingMessageId(instanceId: string, n: number): string {
  return digest(instanceId, 'in', n).slice(0, 32).toUpperCase();
}

/**
 * JID of a new group: `120363` + 12 digits `@g.us`, the shape of the platform's group ids (docs/api.md#conventions).
 */
export function groupJidFor(instanceId: string, n: number): Jid {
  const value = BigInt(`0x${digest(instanceId, 'group', n).slice(0, 16)}`) % 1_000_000_000_000n;
  return `120363${value.toString().padStart(12, '0')}@${GROUP_DOMAIN}`;
}

/** A group's invite code: 22 base64url-ish characters derived from the group JID (letters and digits only). */
export function inviteCodeFor(instanceId: string, jid: Jid): string {
  return createHmac('sha256', 'parley-sandbox-invite')
    .update(`${instanceId}:${jid}`)
    .digest('base64')
    .replace(/[^A-Za-z0-9]/g, '')
    .slice(0, 22);
}

/**
 * Hands out the sequence numbers behind sandbox ids, unique per instance across restarts: a block of
 * {@link SEQUENCE_BLOCK} numbers is reserved in the auth port at a time, so most ids cost no write and a restart
 * simply continues at the next block. Holds two numbers and a promise: an idle instance costs almost nothing.
 */
export class SequenceAllocator {
  readonly #auth: AuthStateStore;
  #next = 0;
  #limit = 0;
  #pending: Promise<number> | null = null;

  constructor(auth: AuthStateStore) {
    this.#auth = auth;
  }

  /** The next number; reserves a new block in the store when the current one is used up. */
  next(): Promise<number> {
    const run = (this.#pending ?? Promise.resolve(0)).then(() => this.#take());
    const pending = run.catch(() => 0);
    this.#pending = pending;
    void pending.then(() => {
      if (this.#pending === pending) this.#pending = null;
    });
    return run;
  }

  async #take(): Promise<number> {
    if (this.#next >= this.#limit) {
      const stored = (await this.#auth.get(SEQUENCE.category, [SEQUENCE.id])).get(SEQUENCE.id);
      const start = stored === undefined ? 0 : Number(stored);
      await this.#auth.set([{ ...SEQUENCE, value: String(start + SEQUENCE_BLOCK) }]);
      this.#next = start;
      this.#limit = start + SEQUENCE_BLOCK;
    }
    const n = this.#next;
    this.#next += 1;
    return n;
  }
}
