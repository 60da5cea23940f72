import { type GroupMetadata, jidNormalizedUser, type proto } from 'baileys';
import type { Jid } from '../../domain/messages.ts';
import type { EngineSessionContext } from '../engine.ts';
import { AccountOperations } from './account-operations.ts';
import { AuthStoreMemo } from './auth-memo.ts';
import type { BoundedCache } from './cache.ts';
import { CallHandler } from './calls.ts';
import { CONTACTS_CATEGORY, ContactBook } from './contacts.ts';
import { keepGroup } from './groups.ts';
import type { Identity, MappingContext } from './incoming.ts';
import { JidResolver, toPhoneJid } from './jid.ts';
import { LearnedLids } from './lids.ts';
import { Lifecycle } from './lifecycle.ts';
import { attachListeners, IncomingQueue } from './listeners.ts';
import * as ops from './operations.ts';
import { resendableProto } from './outgoing.ts';
import { type BaileysSessionOptions, quieterLevel, SessionCaches, socketConfig } from './session-options.ts';
import type { SocketLike } from './socket.ts';
import { operationSocket } from './socket-access.ts';

/**
 * The parts of one live session that its operations use (session.ts `BaileysSession`,
 * docs/decisions/0025-live-engine.md), built and wired to each other by {@link sessionParts}.
 */
export interface SessionParts {
  /** The session's context, its auth store read and written through one memo (auth-memo.ts). */
  context: EngineSessionContext;
  /** The socket lifecycle (lifecycle.ts). */
  life: Lifecycle;
  /** The account's contacts, kept in the auth store (contacts.ts). */
  contacts: ContactBook;
  /** The session's bounded caches (session-options.ts). */
  caches: SessionCaches;
  /** The serial queue the incoming events are mapped and recorded through, one at a time in arrival order. */
  queue: IncomingQueue;
  /** What the message, group and update operations need (operations.ts). */
  deps: ops.OperationDeps;
  /** The operations on the account's own state (account-operations.ts). */
  account: AccountOperations;
  /**
   * The open socket for an operation (socket-access.ts `operationSocket`). @throws DomainError not_logged_in /
   * not_connected / platform_unreachable.
   */
  open: () => Promise<SocketLike>;
  /** The session's stop signal: aborted by close, disconnect, logout and a lost lock, renewed by a connect. */
  stopping: SessionStop;
}

/**
 * Aborted when the session stops (close, disconnect, logout, a lost lock), made anew by the next connect: the
 * incoming work a stop waits for (a group metadata read for a deletion, group-revokes.ts) gives up at once.
 */
export class SessionStop {
  #controller = new AbortController();

  /** The signal of the session's current run: each socket's listeners get the one in force when it attaches. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Aborts the current run's signal (a stop under way). */
  stop(): void {
    this.#controller.abort();
  }

  /** A new signal for a connect after a stop; the current one is kept when it was not aborted. */
  renew(): void {
    if (this.#controller.signal.aborted) this.#controller = new AbortController();
  }
}

/**
 * Builds the parts of the live session of `sessionContext` with `options` and wires them to each other: the
 * incoming queue, which records the LID pairs learned before any event it records, and the learned pairs, told
 * again by the resolver when their event was not recorded (docs/decisions/0038-lid-mappings.md); the JID resolver,
 * which asks the socket's LID store, then parley's kept pairs; the one-socket lock, whose loss stops the lifecycle;
 * the lifecycle, its sockets configured by session-options.ts and given the session's listeners (listeners.ts); the
 * calls and the account's operations. Cheap, no I/O: nothing connects until `Lifecycle.connect`.
 */
export function sessionParts(
  sessionContext: EngineSessionContext,
  options: BaileysSessionOptions,
): SessionParts {
  // Every part of the session reads and writes the auth store through one memo (auth-memo.ts), which is only right
  // when nothing goes around it.
  const context = { ...sessionContext, auth: new AuthStoreMemo(sessionContext.auth, [CONTACTS_CATEGORY]) };
  // The pairs learned go before any event the queue records (docs/decisions/0038-lid-mappings.md).
  const queue: IncomingQueue = new IncomingQueue(context, () => learned.recordPending());
  // A pair whose event was not recorded is told again by the resolver the next time the platform teaches it.
  const learned: LearnedLids = new LearnedLids(queue, (mappings) => resolver.untold(mappings));
  const caches = new SessionCaches(() => context.clock());
  const baileysLogger = context.logger.child(
    { component: 'baileys' },
    { level: quieterLevel(context.logger.level, options.baileysLogLevel) },
  );
  const resolver: JidResolver = new JidResolver({
    lookup: () => life.socket?.signalRepository.lidMapping,
    // parley's kept pairs, so a LID known before a restart or a hand-over is named by phone JID
    // (docs/decisions/0038-lid-mappings.md).
    ...(context.keptLidPhone ? { kept: context.keptLidPhone.bind(context) } : {}),
    ...(context.keptLidPhones ? { keptMany: context.keptLidPhones.bind(context) } : {}),
    onLookupError: (error, lid) =>
      context.logger.warn({ err: error, lid }, 'LID lookup failed; passing the LID on unresolved'),
    onLearned: (mapping) => learned.add(mapping),
  });
  const contacts = new ContactBook(context.auth);
  const mapping: MappingContext = { resolver, me: () => identityOf(life) };
  const fetchGroup = (jid: string) => fetchGroupFor(life, caches.groups, resolver, jid);
  const subscribePresence = (sock: SocketLike, jid: Jid) =>
    subscribeOnce(context, caches.presence, sock, jid);
  const stopping = new SessionStop();
  const lock = options.locks.forInstance(context.instanceId, {
    clock: context.clock,
    onLost: (reason) => {
      stopping.stop();
      life.lockLost(reason).catch((error: unknown) => {
        context.logger.error({ err: error, reason }, 'stopping after the one-socket lock was lost failed');
      });
    },
    onRenewError: (error) => context.logger.warn({ err: error }, 'renewing the one-socket lock failed'),
  });
  const life: Lifecycle = new Lifecycle({
    context,
    lock,
    socketFactory: options.socketFactory,
    baileysLogger,
    socketConfig: () =>
      socketConfig(
        options,
        caches,
        async (key) => storedForRetry(context, caches.recent, key.id),
        (jid) => fetchGroup(jid),
      ),
    version: options.version,
    fetchVersion: options.fetchVersion,
    keyCache: caches.keyCache,
    connectDeadlineMs: options.connectDeadlineMs,
    random: options.random,
    loginRefusalLimit: options.loginRefusalLimit,
    attach: (sock) =>
      attachListeners(sock, {
        context,
        mapping,
        resolver,
        contacts,
        groups: caches.groups,
        undecrypted: caches.undecrypted,
        fetchGroup,
        stopping: stopping.signal,
        queue,
        subscribePresence,
        calls: (s, incoming) => calls.handle(s, incoming),
      }),
  });
  const deps: ops.OperationDeps = {
    context,
    mapping,
    groups: caches.groups,
    recent: caches.recent,
    ackTimeoutMs: options.ackTimeoutMs,
    baileysLogger,
    reachout: () => life.reachout,
    record: (event) => context.emit(event),
    subscribePresence,
    ...(options.linkPreview ? { linkPreview: options.linkPreview } : {}),
  };
  const calls: CallHandler = new CallHandler({
    context,
    resolver,
    record: (event) => queue.record(event),
    send: (sock, message) => ops.sendMessage(sock, deps, message),
  });
  const open = () => operationSocket(life);
  const account = new AccountOperations({
    context,
    life,
    resolver,
    calls,
    open,
    recorded: () => queue.drained(),
  });
  return { context, life, contacts, caches, queue, deps, account, open, stopping };
}

/** The account's own identity from the credentials `life` has loaded (phone JID, LID, push name). */
function identityOf(life: Lifecycle): Identity {
  const me = life.creds?.me;
  const phoneJid = me?.id ? toPhoneJid(me.id) : null;
  return { phoneJid, lid: me?.lid ? jidNormalizedUser(me.lid) : null, pushName: me?.name ?? '' };
}

/**
 * The content of message `id` for a platform retry (Baileys' `getMessage`): from the recently sent messages
 * (`recent`) first, else from the store; undefined when neither has it, or when the store could not be read (logged).
 */
async function storedForRetry(
  context: EngineSessionContext,
  recent: BoundedCache,
  id: string | null | undefined,
): Promise<proto.IMessage | undefined> {
  if (!id) return undefined;
  const sent = recent.get<proto.IMessage>(id);
  if (sent) return sent;
  try {
    const found = await context.findMessage(id);
    return found ? resendableProto(found.content) : undefined;
  } catch (error) {
    // The platform asked to resend a message the store could not read: it is answered as unknown.
    context.logger.warn({ err: error, id }, 'reading a stored message for a platform retry failed');
    return undefined;
  }
}

/**
 * Group `jid`'s metadata for a send Baileys relays to it while the cache does not hold it (session-options.ts
 * `socketConfig`): fetched through the current socket of `life`, kept in `groups` and teaching `resolver` its members'
 * LID pairs (groups.ts `keepGroup`, docs/decisions/0038-lid-mappings.md), so a member's receipts name them by phone
 * JID. Undefined without a socket (Baileys then fetches it itself). @throws the socket's error (the send fails).
 */
async function fetchGroupFor(
  life: Lifecycle,
  groups: BoundedCache,
  resolver: JidResolver,
  jid: string,
): Promise<GroupMetadata | undefined> {
  const sock = life.socket;
  if (!sock) return undefined;
  const meta = await sock.groupMetadata(jid);
  keepGroup(meta, groups, resolver);
  return meta;
}

/**
 * Subscribes `sock` to the presence of `jid` unless `presence` (a bounded cache) says it did lately; a failure is
 * logged at debug level.
 */
function subscribeOnce(
  context: EngineSessionContext,
  presence: BoundedCache,
  sock: SocketLike,
  jid: Jid,
): void {
  if (presence.get(jid)) return;
  presence.set(jid, true);
  sock.presenceSubscribe(jid).catch((error: unknown) => {
    context.logger.debug({ err: error }, 'presence subscription failed');
  });
}
