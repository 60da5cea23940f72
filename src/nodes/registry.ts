import { randomUUID } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { ConfigError } from '../config/config.ts';
import {
  beatNode,
  getNode,
  listOtherNodes,
  type NodeRecord,
  registerNode,
  removeDeadNodes,
  removeNode,
  takeOverNode,
} from '../store/nodes.ts';
import type { Database } from '../store/schema.ts';
import { StoreClock } from './store-clock.ts';

/** Default time between heartbeats, milliseconds. */
export const HEARTBEAT_MS = 5000;
/**
 * Default age of the last heartbeat after which a node counts as dead, milliseconds
 * (docs/decisions/0008-leases-and-fencing.md: within 15 s).
 */
export const DEAD_AFTER_MS = 15_000;

/**
 * Incarnations ({@link NodeRegistry.incarnation}) registered by this operating-system process: several services in
 * one process, as tests build them, share its process id without being each other's predecessors.
 */
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
  /**
   * Called once when another process took this node's id over while it ran ({@link NodeRegistry.displaced}): the
   * caller closes every session and stops renewing leases (docs/decisions/0008-leases-and-fencing.md, "Node
   * identity"). `reason` is the line logged. Must not throw.
   */
  onDisplaced?: (reason: string) => void;
  /**
   * The clock heartbeats are written and judged on, epoch ms: the store's, shared by every node
   * (docs/decisions/0008-leases-and-fencing.md, "One clock"). Default: `clock`, synced at every heartbeat and sweep.
   * Liveness is real time, never a test's business clock; a test that drives it by hand passes a fake here.
   */
  now?: () => number;
  /**
   * The store's clock: the node's one {@link StoreClock}, which the services share with the lease keeper, the
   * one-socket locks and the webhook worker (default: one of its own over `db`, for a registry built alone); ignored
   * when `now` is given.
   */
  clock?: Pick<StoreClock, 'now' | 'sync'>;
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

/** Whether `node` was registered by a registry of this operating-system process that still runs. */
function registeredInThisProcess(node: NodeRecord): boolean {
  return node.incarnation != null && registeredHere.has(node.incarnation);
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
  if (!sameSpace(node, self) || registeredInThisProcess(node)) return null;
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
 * A start refused because a live process uses this node's id (`NODE_ID` given to two nodes): the message names it,
 * as `NODE_ID node-a is in use by host-1 pid 4321 (heartbeat 2 s ago): …`, and the start fails with it
 * (docs/deploy.md "Start-up errors"; docs/decisions/0008-leases-and-fencing.md, "Node identity").
 */
export class NodeIdInUseError extends ConfigError {
  override name = 'NodeIdInUseError';
  /** The row of the process using the id, as last read. */
  readonly holder: NodeRecord;

  constructor(holder: NodeRecord, now: number, deadAfterMs: number) {
    const ago = Math.max(0, Math.round((now - holder.heartbeatAt) / 1000));
    super(
      `NODE_ID ${holder.id} is in use by ${holder.host} pid ${holder.pid} (heartbeat ${ago} s ago): give every ` +
        `node its own NODE_ID; if that process is gone, start again once its heartbeat is older than ` +
        `${Math.ceil(deadAfterMs / 1000)} s`,
    );
    this.holder = holder;
  }
}

/**
 * The node registry (Graphile Worker's model: worker ids, heartbeats, `forceUnlockWorkers` for the dead). Each
 * parley process registers under an id (random per boot unless `NODE_ID` names it), which is also the `locked_by` of
 * its webhook claims and the owner of its instance leases, and renews a heartbeat row every `heartbeatMs`. At boot
 * and on every heartbeat it looks at the other registered nodes, judges each with {@link deathOf}, and releases the
 * claims of the dead in one transaction with their rows, so a restart after kill -9 resumes delivery within seconds
 * (instead of after the stale-claim timeout) and in `sequence` order, while a live peer sharing the store keeps its
 * claims. Claims whose owner is not registered at all (a process of an older version) are still taken over only
 * once stale. Several nodes (docs/decisions/0008-leases-and-fencing.md) build on the same registry.
 *
 * One id is one process (docs/decisions/0008-leases-and-fencing.md, "Node identity"): its row carries the
 * process's {@link incarnation}. A start that finds its id's row left by a dead process (a restart with the same
 * `NODE_ID`) takes it over and releases what that process held, as for any dead node; one that finds it held by a
 * live process is refused ({@link NodeIdInUseError}). A running node whose row another process took over stops
 * heartbeating and reports it ({@link displaced}, `onDisplaced`): it must stop serving, never exit.
 */
export class NodeRegistry {
  readonly id: string;
  /** Random per registry: which process holds the row of {@link id} (migration 0032). */
  readonly incarnation = randomUUID();
  readonly #options: NodeRegistryOptions;
  readonly #host = hostname();
  readonly #space: string | null;
  readonly #heartbeatMs: number;
  readonly #deadAfterMs: number;
  readonly #now: () => number;
  /** Reads the store's clock (a no-op when the options' `now` drives time). */
  readonly #sync: () => Promise<void>;
  readonly #startedAt: string;
  #timer: NodeJS.Timeout | undefined;
  #tick: Promise<void> = Promise.resolve();
  /** Epoch ms of the last heartbeat the store accepted (0: none yet, or stopped). */
  #beatAt = 0;
  /** Why this node stopped serving: another process holds its id now (undefined while it does not). */
  #displaced: string | undefined;

  constructor(options: NodeRegistryOptions) {
    this.#options = options;
    this.id = options.id ?? `${this.#host.slice(0, 60)}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.#space = options.processSpace === undefined ? (processSpace() ?? null) : options.processSpace;
    this.#heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
    this.#deadAfterMs = options.deadAfterMs ?? DEAD_AFTER_MS;
    if (options.now === undefined) {
      const clock = options.clock ?? new StoreClock({ db: options.db, logger: options.logger });
      this.#now = () => clock.now();
      this.#sync = () => clock.sync();
    } else {
      this.#now = options.now;
      this.#sync = async () => undefined;
    }
    // Shown only (the start of this process), never compared across nodes: this node's wall clock.
    this.#startedAt = new Date(options.now?.() ?? Date.now()).toISOString();
  }

  /**
   * Registers this node, releases the claims of dead nodes (a predecessor killed on this host included), then
   * heartbeats and sweeps every `heartbeatMs`. Call before the webhook worker starts claiming.
   *
   * When a row with this node's id exists (docs/decisions/0008-leases-and-fencing.md, "Node identity"): left by a
   * dead process ({@link deathOf}: its heartbeat expired, or its process is gone from this process space), it is
   * taken over and that process's webhook claims released and its leases expired, at once; held by a live process
   * (in this process space, or under another host name), the start is refused; held by a process of this host name
   * in another process space (a restarted container, whose predecessor cannot be seen), the start waits, looking
   * every heartbeat or second: refused as soon as that row's heartbeat is renewed, taken over once it expired (at
   * most `deadAfterMs` after its last one).
   * @throws NodeIdInUseError when a live process uses this node's id; the store's error when it refuses the
   *   registration (the service cannot run without its store).
   */
  async start(): Promise<void> {
    await this.#claim();
    registeredHere.add(this.incarnation);
    await this.sweep();
    this.#timer = setInterval(() => {
      this.#tick = this.#tick.then(async () => {
        try {
          // The sweep judges on the reading the heartbeat just made: one read of the store's clock a round.
          await this.#beat();
          if (this.#displaced === undefined) await this.#sweep(false);
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
   * docs/decisions/0008-leases-and-fencing.md). Heartbeats are judged on the store's clock, read first (never this
   * node's wall clock, which can step: "One clock").
   * @returns how many claims were released.
   * @throws the store's error.
   */
  sweep(): Promise<number> {
    return this.#sweep(true);
  }

  /** {@link sweep}, reading the store's clock first when `sync` (the heartbeat's round has just read it). */
  async #sweep(sync: boolean): Promise<number> {
    const { db, logger } = this.#options;
    // Judged on the store's clock: a node whose wall clock stepped forward found every other node dead.
    if (sync) await this.#sync();
    const self = this.#judge();
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

  /**
   * Why this node stopped serving, once a heartbeat found its row held by another process (the same `NODE_ID`
   * started elsewhere, or a restart that found this process's heartbeat lapsed); undefined until then. Final: the
   * node no longer heartbeats, and reports itself not {@link registered}.
   */
  get displaced(): string | undefined {
    return this.#displaced;
  }

  /**
   * Stops heartbeating and removes this node's row (after its claims were finished or released), unless another
   * process holds the id now. Never throws.
   */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#tick;
    this.#beatAt = 0;
    registeredHere.delete(this.incarnation);
    await removeNode(this.#options.db, this.id, this.incarnation).catch((error: unknown) =>
      this.#options.logger.warn({ err: error }, 'removing the node row at shutdown failed'),
    );
  }

  #judge(): DeathJudge {
    return {
      processSpace: this.#space,
      pid: process.pid,
      now: this.#now(),
      deadAfterMs: this.#deadAfterMs,
      processAlive: this.#options.processAlive ?? processAlive,
    };
  }

  #record(at: number): NodeRecord {
    return {
      id: this.id,
      host: this.#host,
      pid: process.pid,
      startedAt: this.#startedAt,
      heartbeatAt: at,
      processSpace: this.#space,
      incarnation: this.incarnation,
    };
  }

  /** Makes this node's id's row this process's (see {@link start}). */
  async #claim(): Promise<void> {
    const { db, logger } = this.#options;
    for (;;) {
      await this.#sync();
      const at = this.#now();
      if (await registerNode(db, this.#record(at))) {
        this.#beatAt = at;
        return;
      }
      const holder = await getNode(db, this.id);
      if (holder === undefined) continue;
      const self = this.#judge();
      const reason = deathOf(holder, self);
      if (reason !== null) {
        const released = await takeOverNode(db, this.#record(self.now), holder, self.now);
        if (released === undefined) continue;
        this.#beatAt = self.now;
        logger.info(
          { node: this.id, previous: { host: holder.host, pid: holder.pid, reason }, released },
          'took this node id over from a process that is gone, releasing its webhook claims and leases',
        );
        if (released > 0) this.#options.onReleased?.(released);
        return;
      }
      if (sameSpace(holder, self) || holder.host !== this.#host)
        throw new NodeIdInUseError(holder, self.now, this.#deadAfterMs);
      await this.#waitOut(holder);
    }
  }

  /**
   * Waits until the row `holder` (this node's id, held by a process of this host name that this process cannot see)
   * changes or its heartbeat expires.
   * @throws NodeIdInUseError as soon as its process renews its heartbeat: it runs.
   */
  async #waitOut(holder: NodeRecord): Promise<void> {
    const expires = holder.heartbeatAt + this.#deadAfterMs;
    this.#options.logger.warn(
      {
        node: this.id,
        holder: { host: holder.host, pid: holder.pid },
        waitMs: Math.max(0, expires - this.#now()),
      },
      'this node id is held by a process in another PID namespace (a restarted container?): waiting until it ' +
        'renews its heartbeat (the start is refused) or its heartbeat expires (it is taken over)',
    );
    for (;;) {
      const now = this.#now();
      if (now > expires) return;
      await delay(Math.max(1, Math.min(this.#heartbeatMs, 1000, expires + 1 - now)));
      const current = await getNode(this.#options.db, this.id);
      if (current === undefined || current.incarnation !== holder.incarnation) return;
      if (current.heartbeatAt !== holder.heartbeatAt)
        throw new NodeIdInUseError(current, this.#now(), this.#deadAfterMs);
    }
  }

  /**
   * Renews this node's heartbeat. A row that is gone (a sweep found this node dead while it stalled) is made again;
   * one another process holds now makes this node {@link displaced}.
   */
  async #beat(): Promise<void> {
    if (this.#displaced !== undefined) return;
    const { db } = this.#options;
    await this.#sync();
    const at = this.#now();
    if (await beatNode(db, this.id, this.incarnation, at)) {
      this.#beatAt = at;
      return;
    }
    if (await registerNode(db, this.#record(at))) {
      this.#beatAt = at;
      return;
    }
    const holder = await getNode(db, this.id);
    if (holder === undefined || holder.incarnation === this.incarnation) return;
    this.#displace(holder);
  }

  #displace(holder: NodeRecord): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#beatAt = 0;
    registeredHere.delete(this.incarnation);
    const reason =
      `NODE_ID ${this.id} was taken over by ${holder.host} pid ${holder.pid}: this node stops serving (its sessions ` +
      'closed, its leases left to that process) until it is restarted; give every node its own NODE_ID';
    this.#displaced = reason;
    this.#options.logger.error({ node: this.id, holder: { host: holder.host, pid: holder.pid } }, reason);
    this.#options.onDisplaced?.(reason);
  }
}
