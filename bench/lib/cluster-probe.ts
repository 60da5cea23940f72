import { type Kysely, sql } from 'kysely';
import type { Database } from '../../src/store/schema.ts';
import { sleep } from './stats.ts';

/**
 * Read-only probes of the cluster benchmark (bench/scenarios/cluster.ts) on the store the nodes share: who owns
 * which instance (`instance_leases`), the webhook outbox (`webhook_deliveries`), the events recorded
 * (`webhook_events`) and the messages stored (`messages`).
 */

/**
 * Polls `check` every 100 ms until it is true; resolves true then, false when `timeoutMs` passed first (never
 * throws on a timeout, unlike bench/lib/live.ts's `waitUntil`).
 */
export async function pollUntil(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
}

/** Instances per lease owner: node id → how many of the instances in `owners` (instance id → node id) it owns. */
export function perNode(owners: Map<string, string>): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const owner of owners.values()) counts[owner] = (counts[owner] ?? 0) + 1;
  return counts;
}

/** The probes, on the shared store's Kysely handle. */
export class ClusterProbe {
  /**
   * @param db the store the nodes share.
   * @param timeoutMs longest wait of {@link drained} for the outbox to empty, ms.
   */
  constructor(
    private readonly db: Kysely<Database>,
    private readonly timeoutMs: number,
  ) {}

  /** The lease owner of every leased instance: instance id → node id. */
  async owners(): Promise<Map<string, string>> {
    const rows = await this.db.selectFrom('instance_leases').select(['instance_id', 'owner']).execute();
    return new Map(rows.map((row) => [row.instance_id, row.owner]));
  }

  /** Webhook deliveries still `pending` (the outbox's size). */
  async pending(): Promise<number> {
    return this.deliveriesWithStatus('pending');
  }

  /** Webhook deliveries that gave up (`failed`). */
  async failedDeliveries(): Promise<number> {
    return this.deliveriesWithStatus('failed');
  }

  /**
   * Waits for an empty outbox; resolves with the ms it took.
   * @throws Error naming `what` and the deliveries left when it is not empty within the timeout.
   */
  async drained(what: string): Promise<number> {
    const started = Date.now();
    if (!(await pollUntil(async () => (await this.pending()) === 0, this.timeoutMs))) {
      throw new Error(`${what}: ${await this.pending()} deliveries still pending after ${this.timeoutMs} ms`);
    }
    return Date.now() - started;
  }

  /** The last event `sequence` of every instance that has events: instance id → sequence. */
  async lastSequences(): Promise<Map<string, number>> {
    const rows = await this.db
      .selectFrom('webhook_events')
      .select(['instance_id', sql<number>`max(sequence)`.as('last')])
      .groupBy('instance_id')
      .execute();
    return new Map(rows.map((row) => [row.instance_id, Number(row.last)]));
  }

  /**
   * Ids (`webhook-id`s) of the events queued for delivery (no skip reason) that were recorded after `before`
   * (from {@link lastSequences}; an instance missing there counts from sequence 0).
   */
  async eventsSince(before: Map<string, number>): Promise<string[]> {
    const events = await this.db
      .selectFrom('webhook_events')
      .select(['id', 'instance_id', 'sequence'])
      .where('skip_reason', 'is', null)
      .execute();
    return events
      .filter((event) => event.sequence > (before.get(event.instance_id) ?? 0))
      .map((event) => event.id);
  }

  /** How many of the message ids `ids` are stored in `messages` (queried 500 ids at a time). */
  async storedMessages(ids: string[]): Promise<number> {
    let stored = 0;
    for (let i = 0; i < ids.length; i += 500) {
      const chunk = ids.slice(i, i + 500);
      const rows = await this.db.selectFrom('messages').select('id').where('id', 'in', chunk).execute();
      stored += new Set(rows.map((row) => row.id)).size;
    }
    return stored;
  }

  /** Webhook deliveries with `status`. */
  private async deliveriesWithStatus(status: 'pending' | 'failed'): Promise<number> {
    const row = await this.db
      .selectFrom('webhook_deliveries')
      .select(sql<number>`count(*)`.as('n'))
      .where('status', '=', status)
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }
}
