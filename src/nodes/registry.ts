import { randomUUID } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { listOtherNodes, type NodeRecord, removeDeadNodes, removeNode, upsertNode } from '../store/nodes.ts';
import type { Database } from '../store/schema.ts';

/** Default time between heartbeats, milliseconds. */
export const HEARTBEAT_MS = 5000;
/**
 * Default age of the last heartbeat after which a node counts as dead, milliseconds
 * (docs/decisions/0008-leases-and-fencing.md: within 15 s).
 */
export const DEAD_AFTER_MS = 15_000;

/** Ids registered by this operating-system process (several services in one process, as tests build them). */
const registeredHere = new Set<string>();

/** Options of a {@link NodeRegistry}. Durations in milliseconds. */
export interface NodeRegistryOptions {
  db: Kysely<Database>;
  logger: FastifyBaseLogger;
  /** This node's id (default `<host>:<pid>:<random>`, new on every boot); at most 100 characters. */
  id?: string;
  /** Time between heartbeats and sweeps (default {@link HEARTBEAT_MS}). */
  heartbeatMs?: number;
  /** A node whose last heartbeat is older than this is dead (default {@link DEAD_AFTER_MS}). */
  deadAfterMs?: number;
  /** Called after claims of dead nodes were released (the webhook worker wakes to take them). Must not throw. */
  onReleased?: (claims: number) => void;
  /** Wall clock, epoch ms (default Date.now). Liveness is real time, never a test's business clock. */
  now?: () => number;
  /** Whether process `pid` exists in this process space (default: `process.kill(pid, 0)` does not fail with ESRCH). */
  processAlive?: (pid: number) => boolean;
  /**
   * This process's process-id space (default {@link processSpace}; null: unknown, judged by heartbeats only). Tests
   * set it to stand for a process in another PID namespace.
   */
  processSpace?: string | null;
}

/** Why a registered node counts as dead, or null while it is alive. */
export type DeathReason = 'heartbeat expired' | 'process gone' | null;

/** What {@link deathOf} compares a node with: this process, at `now` (epoch ms). */
export interface DeathJudge {
  /** This process's process-id space ({@link processSpace}); null or undefined when unknown. */
  processSpace: string | null | undefined;
  pid: number;
  now: number;
  deadAfterMs: number;
  /** Whether process `pid` exists in this process space. */
  processAlive: (pid: number) => boolean;
}

let ownSpace: { value: string | undefined } | undefined;

/**
 * The process-id space this process runs in: where a process id names the same process, so that a node can tell
 * whether another node's process still exists (docs/decisions/0008-leases-and-fencing.md, "Node identity"). On
 * Linux, the kernel's boot id (`/proc/sys/kernel/random/boot_id`, one per machine and boot, the same in its
 * containers) and the PID namespace (`/proc/self/ns/pid`, e.g. `pid:[4026531836]`), as `<boot id>/<namespace>`:
 * containers on one machine that share its host name (`--network host`, Kubernetes `hostNetwork`) each have their
 * own. Undefined when either cannot be read, and on other systems, where a host name alone would not tell two
 * machines apart: a node there is found dead by its heartbeat only. Read once per process.
 */
export function processSpace(): string | undefined {
  ownSpace ??= { value: readProcessSpace() };
  return ownSpace.value;
}

function readProcessSpace(): string | undefined {
  if (process.platform !== 'linux') return undefined;
  try {
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const namespace = readlinkSync('/proc/self/ns/pid');
    return boot === '' || namespace === '' ? undefined : `${boot}/${namespace}`.slice(0, 200);
  } catch {
    return undefined;
  }
}

/** Whether `node` ran in `self`'s process-id space: only then do its process id and `self`'s name the same thing. */
function sameSpace(node: NodeRecord, self: Pick<DeathJudge, 'processSpace'>): boolean {
  return node.processSpace != null && self.processSpace != null && node.processSpace === self.processSpace;
}

/**
 * Whether `node` is dead as seen from this process at `self.now` (epoch ms), and why:
 * - `heartbeat expired`: its last heartbeat is older than `deadAfterMs` (wherever it ran; how a node in another
 *   process space is found dead, within `deadAfterMs` plus one heartbeat);
 * - `process gone`: it ran in this process space ({@link processSpace}, the same machine and PID namespace) and its
 *   process no longer exists, or its process id is this process's own while it was not registered by this process
 *   (a process restarted with the same id). This is how a restarted process recognises its own dead predecessor at
 *   boot, at once, while a live peer (a different, running process) is left alone.
 * A node in another process space, or one whose space is unknown (a row of an older version, a system without
 * `/proc`), is never found gone by its process: its process id may be another namespace's, or name nothing here
 * while it runs (docs/decisions/0008-leases-and-fencing.md, "Node identity"). Should the dead process's id have been
 * reused by an unrelated process meanwhile, the node is found dead by its lapsed heartbeat instead.
 */
export function deathOf(node: NodeRecord, self: DeathJudge): DeathReason {
  if (node.heartbeatAt < self.now - self.deadAfterMs) return 'heartbeat expired';
  if (!sameSpace(node, self) || registeredHere.has(node.id)) return null;
  if (node.pid === self.pid || !self.processAlive(node.pid)) return 'process gone';
  return null;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/**
 * The node registry (Graphile Worker's model: worker ids, heartbeats, `forceUnlockWorkers` for the dead). Each
 * parley process registers under an id random per boot, which is also the `locked_by` of its webhook claims,
 * and renews a heartbeat row every `heartbeatMs`. At boot and on every heartbeat it looks at the other
 * registered nodes, judges each with {@link deathOf}, and releases the claims of the dead in one transaction
 * with their rows, so a restart after kill -9 resumes delivery within seconds (instead of after the stale-claim
 * timeout) and in `sequence` order, while a live peer sharing the store keeps its claims. Claims whose owner is
 * not registered at all (a process of an older version) are still taken over only once stale. Several nodes
 * (docs/decisions/0008-leases-and-fencing.md) build on the same registry.
 */
export class NodeRegistry {
  readonly id: string;
  readonly #options: NodeRegistryOptions;
  readonly #host = hostname();
  readonly #space: string | null;
  readonly #heartbeatMs: number;
  readonly #deadAfterMs: number;
  readonly #now: () => number;
  readonly #startedAt: string;
  #timer: NodeJS.Timeout | undefined;
  #tick: Promise<void> = Promise.resolve();
  /** Epoch ms of the last heartbeat the store accepted (0: none yet, or stopped). */
  #beatAt = 0;

  constructor(options: NodeRegistryOptions) {
    this.#options = options;
    this.id = options.id ?? `${this.#host.slice(0, 60)}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.#space = options.processSpace === undefined ? (processSpace() ?? null) : options.processSpace;
    this.#heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
    this.#deadAfterMs = options.deadAfterMs ?? DEAD_AFTER_MS;
    this.#now = options.now ?? Date.now;
    this.#startedAt = new Date(this.#now()).toISOString();
  }

  /**
   * Registers this node, releases the claims of dead nodes (a predecessor killed on this host included), then
   * heartbeats and sweeps every `heartbeatMs`. Call before the webhook worker starts claiming.
   * @throws when the store refuses the registration (the service cannot run without its store).
   */
  async start(): Promise<void> {
    registeredHere.add(this.id);
    await this.#beat();
    await this.sweep();
    this.#timer = setInterval(() => {
      this.#tick = this.#tick.then(async () => {
        try {
          await this.#beat();
          await this.sweep();
        } catch (error) {
          this.#options.logger.warn({ err: error }, 'node heartbeat failed');
        }
      });
    }, this.#heartbeatMs);
    this.#timer.unref();
  }

  /**
   * Releases the claims of every registered node that is dead (see {@link deathOf}) and forgets those nodes; the
   * instance leases of a node whose process is gone expire now (`removeDeadNodes`,
   * docs/decisions/0008-leases-and-fencing.md).
   * @returns how many claims were released.
   */
  async sweep(): Promise<number> {
    const { db, logger } = this.#options;
    const self: DeathJudge = {
      processSpace: this.#space,
      pid: process.pid,
      now: this.#now(),
      deadAfterMs: this.#deadAfterMs,
      processAlive: this.#options.processAlive ?? processAlive,
    };
    const dead = (await listOtherNodes(db, this.id))
      .map((node) => ({ node, reason: deathOf(node, self) }))
      .filter((entry) => entry.reason !== null);
    if (dead.length === 0) return 0;
    const released = await removeDeadNodes(
      db,
      dead.map((entry) => entry.node.id),
      {
        ids: dead.filter((entry) => entry.reason === 'process gone').map((entry) => entry.node.id),
        at: self.now,
      },
    );
    logger.info(
      { nodes: dead.map((entry) => ({ id: entry.node.id, reason: entry.reason })), released },
      'released the webhook claims of dead nodes',
    );
    if (released > 0) this.#options.onReleased?.(released);
    return released;
  }

  /** Whether this node is registered: its last heartbeat was stored less than `deadAfterMs` ago. */
  get registered(): boolean {
    return this.#beatAt !== 0 && this.#now() - this.#beatAt < this.#deadAfterMs;
  }

  /** Stops heartbeating and removes this node's row (after its claims were finished or released). Never throws. */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#tick;
    this.#beatAt = 0;
    registeredHere.delete(this.id);
    await removeNode(this.#options.db, this.id).catch((error: unknown) =>
      this.#options.logger.warn({ err: error }, 'removing the node row at shutdown failed'),
    );
  }

  async #beat(): Promise<void> {
    const at = this.#now();
    await upsertNode(this.#options.db, {
      id: this.id,
      host: this.#host,
      pid: process.pid,
      startedAt: this.#startedAt,
      heartbeatAt: at,
      processSpace: this.#space,
    });
    this.#beatAt = at;
  }
}
