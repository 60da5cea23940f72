import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/config.ts';
import type { Clock } from '../domain/clock.ts';
import type { EngineMessage } from '../domain/messages.ts';
import type { BaileysEngineOptions } from '../engines/baileys/index.ts';
import { DeferredEngine } from '../engines/deferred.ts';
import type { Engine } from '../engines/engine.ts';
import { SandboxEngine } from '../engines/sandbox/index.ts';
import { HeldReceipts } from '../events/held-receipts.ts';
import { InstanceStateProjection } from '../events/instance-state.ts';
import { LabelProjection } from '../events/label-projection.ts';
import { LidMappingProjection } from '../events/lid-mapping-projection.ts';
import { MessageCopies } from '../events/message-copies.ts';
import { MessageProjection } from '../events/message-projection.ts';
import { EventRecorder } from '../events/recorder.ts';
import type { SecretBox } from '../security/secrets.ts';
import { SqlSessionLocks } from '../sessions/instance-lock.ts';
import { SessionManager } from '../sessions/manager.ts';
import { readCallSettings } from '../store/call-settings.ts';
import type { Store } from '../store/database.ts';
import { findStoredMessage } from '../store/messages.ts';
import { recorderTurns } from '../store/recorder-turns.ts';
import type { TurnTransactions } from '../store/turn-transactions.ts';

/** The engines and the sessions over them, with the recorder every engine event goes through. */
export interface SessionParts {
  /** Applies engine events to the projections (more are added by the webhook and send wiring). */
  recorder: EventRecorder;
  sessions: SessionManager;
  /** The live engine, closed last by `Services.close`. */
  live: Engine;
  /**
   * What tells the copies of messages recorded before (src/events/message-copies.ts), used before the message
   * projection; the outbox asks it too.
   */
  copies: MessageCopies;
  /**
   * Which receipts the message projection held for sends not recorded yet (src/events/held-receipts.ts); the outbox
   * leaves them out.
   */
  held: HeldReceipts;
}

/**
 * Builds the recorder (instance state and message projections, the copies of messages the platform handed over
 * again told first, src/events/message-copies.ts), the sandbox engine for `test` instances, the live
 * engine for `live` ones (Baileys unless a test passes its own, docs/decisions/0024-engines-and-data-flow.md; its
 * one-socket locks owned by node `nodeId`, their expiries on `storeClock`, the node's one store clock:
 * docs/decisions/0008-leases-and-fencing.md, "One clock") and the session manager over both.
 */
export function wireSessions(
  config: Config,
  deps: {
    store: Store;
    box: SecretBox;
    clock: Clock;
    /** The node's store clock, epoch ms: the one-socket locks' expiries are written and judged on it. */
    storeClock: Clock;
    logger: FastifyBaseLogger;
    nodeId: string;
    /** The store's shared transaction of each event-loop turn (SQLite only). */
    turn?: TurnTransactions | undefined;
    /** The platform's CA (PEM) from `PLATFORM_CA_FILE`, already read. */
    platformCa?: Buffer | undefined;
    liveEngine?: Engine | undefined;
    liveEngineTuning?:
      | Pick<
          BaileysEngineOptions,
          'keepAliveIntervalMs' | 'loginRefusalLimit' | 'random' | 'fetchVersion' | 'ackTimeoutMs'
        >
      | undefined;
    restoreRetry?: { baseMs: number; maxMs: number } | undefined;
  },
): SessionParts {
  const { store, box, clock, logger } = deps;
  const copies = new MessageCopies(clock, logger);
  const held = new HeldReceipts();
  const recorder = new EventRecorder(
    store.db,
    [
      new InstanceStateProjection(clock, store.db),
      copies,
      new MessageProjection(clock, copies, held),
      new LidMappingProjection(clock),
      new LabelProjection(clock),
    ],
    logger,
    // The instances' batches of a turn share one transaction: on SQLite the turn's (docs/decisions/0051-turn-groups.md),
    // on PostgreSQL the recorder's own, with their numbers and rows in one statement each
    // (docs/decisions/0082-recorder-turns-on-postgres.md).
    { turn: deps.turn ?? (store.dialect === 'postgres' ? recorderTurns(store.db) : undefined) },
  );
  // Baileys' module graph is loaded when the first live session is made (docs/decisions/0068-engines-loaded-on-first-use.md).
  const live: Engine =
    deps.liveEngine ??
    new DeferredEngine('baileys', async () => {
      const { BaileysEngine } = await import('../engines/baileys/index.ts');
      return new BaileysEngine({
        locks: new SqlSessionLocks({ db: store.db, owner: deps.nodeId, clock: deps.storeClock }),
        logger,
        clock,
        platform: {
          url: config.platform.url,
          rootKey: config.platform.rootKey,
          ...(deps.platformCa ? { ca: deps.platformCa } : {}),
        },
        ...deps.liveEngineTuning,
      });
    });
  const findMessage = async (instanceId: string, id: string): Promise<EngineMessage | undefined> => {
    const stored = await findStoredMessage(store.db, instanceId, id);
    if (!stored) return undefined;
    const { state: _state, stateAt: _stateAt, ...message } = stored;
    return message;
  };
  const sessions = new SessionManager({
    db: store.db,
    box,
    engines: { test: new SandboxEngine(), live },
    recorder,
    findMessage,
    callSettings: (instanceId) => readCallSettings(store.db, instanceId),
    logger,
    clock,
    ...(deps.restoreRetry ? { restoreRetry: deps.restoreRetry } : {}),
    // Credential and key writes share the turn's transaction too (docs/decisions/0051-turn-groups.md).
    ...(deps.turn === undefined ? {} : { turn: deps.turn }),
  });
  return { recorder, sessions, live, copies, held };
}
