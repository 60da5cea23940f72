import { createHmac, randomBytes } from 'node:crypto';
import type { RegistrationCache } from '../contacts/registration-cache.ts';
import type { Clock } from '../domain/clock.ts';
import { DomainError, errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import { isLidAddress } from '../domain/lids.ts';
import type { ConnectionState, Jid, OutgoingContent, SentMessage } from '../domain/messages.ts';
import { GROUP_DOMAIN, STATUS_BROADCAST, userJid } from '../domain/messages.ts';
import { withTimeout } from '../domain/time-limit.ts';
import { eitherSignal, type WaitSignal } from '../domain/withdrawal.ts';
import type { EngineSession } from '../engines/engine.ts';
import type { EventRecorder } from '../events/recorder.ts';
import { loggedOutBeforeRelay } from '../sends/logout.ts';
import { storedOutcome } from '../sends/outcomes.ts';
import { encodeSendPayload } from '../sends/payload.ts';
import type { SendQueue } from '../sends/queue.ts';
import { messageReport } from '../sends/queue-deps.ts';
import type { SessionManager } from '../sessions/manager.ts';
import type { Store } from '../store/database.ts';
import { takeHeldReceipts } from '../store/held-receipts.ts';
import { findStoredMessage } from '../store/messages.ts';
import { cancelSendJob, findSendJob, type NewSendJob, type SendJob } from '../store/send-jobs.ts';
import { storedChatOf } from './chats.ts';
import { requireRegistered } from './registration-check.ts';

/** True when a chat address (`phone` field) is a group JID rather than a phone number. */
export function isGroupAddress(address: string): boolean {
  return address.endsWith(`@${GROUP_DOMAIN}`);
}

/**
 * The chat JID of a `phone` field: a phone number's user JID, or the group JID, the `<lid>@lid` LID JID or
 * `status@broadcast` (a status, docs/decisions/0044-status-stories.md) as given
 * (docs/decisions/0038-lid-mappings.md).
 */
export function chatJidOf(address: string): Jid {
  return isGroupAddress(address) || isLidAddress(address) || address === STATUS_BROADCAST
    ? address
    : userJid(address);
}

/**
 * A send: the chat address (`phone` field: a phone number, a group JID, or `status@broadcast` for a status) and
 * the message to quote, if any.
 */
export interface SendInput {
  phone: string;
  /**
   * A status (`phone` = `status@broadcast`): the phone numbers (digits) it is shown to
   * (docs/decisions/0044-status-stories.md).
   */
  statusJidList?: readonly string[] | undefined;
  quotedId?: string | undefined;
  /** Phone numbers the text or caption mentions (each written `@<phone>` in it; checked by the caller). */
  mentions?: readonly string[] | undefined;
  /** A forward: the forwarding score to send the message with (≥ 1 marks it forwarded; `OutgoingMessage`). */
  forwardingScore?: number | undefined;
}

/** A reaction: the chat address, the target message id (`me:` stripped, `fromMe` set), the emoji ('' removes). */
export interface ReactInput {
  phone: string;
  targetId: string;
  fromMe: boolean;
  emoji: string;
  /** The author of the target message in a group, when the caller named it. */
  senderPhone?: string | undefined;
}

/** How far ahead a send may be scheduled, ms: 30 days (docs/decisions/0009-sends-as-jobs.md). */
export const MAX_SCHEDULE_AHEAD_MS = 30 * 86_400_000;

/**
 * An async job's `max_attempts`: how often it is tried for transient failures (the session away, the platform
 * unreachable) and relays that were interrupted (its process died, its node lost the instance), counted at each claim
 * (docs/decisions/0009-sends-as-jobs.md).
 */
export const ASYNC_MAX_ATTEMPTS = 25;

/**
 * A synchronous job's `max_attempts` (docs/decisions/0009-sends-as-jobs.md): never tried again after a failed relay
 * (its request answers the failure), but relayed again, under its id, by the instance's next holder after an
 * interrupted relay (its process died or its node lost the instance), until its claims reach this count; the next
 * hand-back then fails it, so a relay that kills its process does not run at every restart. Three, not one: the
 * claim of a relay that never started (a process stopped just after it) counts too, and a send accepted just before
 * a crash or a restart must still go out.
 */
export const SYNC_MAX_ATTEMPTS = 3;

/**
 * How long a send waits for its engine to make the message's id, ms. The sandbox reserves its ids in the store, a
 * block at a time, and waits out a store that cannot be reached; a send not yet stored answers 503 with Retry-After
 * past this bound instead of waiting with it (docs/decisions/0011-store-faults.md).
 */
export const MESSAGE_ID_WAIT_MS = 5_000;

/**
 * True when `session` is still logged in to the account it was logged in to as `accepted` (its state when a send was
 * accepted, logged in): not logged out since, nor linked to another account (a JID not known in either state is not
 * taken for another account).
 */
function sameAccount(session: EngineSession, accepted: ConnectionState): boolean {
  const now = session.state();
  return now.loggedIn && (now.jid === null || accepted.jid === null || now.jid === accepted.jid);
}

/** What an accepted asynchronous send answers: its id, `pending`, and when it is due (epoch ms; null: now). */
export interface QueuedSend {
  id: string;
  status: 'pending';
  sendAt: number | null;
}

/** What {@link MessagingService.cancel} answers. */
export interface CanceledSend {
  id: string;
  status: 'canceled';
}

let lastSeq = 0;

/** Acceptance order of a send in this process: epoch µs, strictly increasing. */
function nextSeq(now: number): number {
  lastSeq = Math.max(lastSeq + 1, now * 1000);
  return lastSeq;
}

/** A platform-shaped id (`3EB0` + 18 hex) for a send accepted while no engine session is here to make one. */
function fallbackMessageId(): string {
  return `3EB0${randomBytes(9).toString('hex').toUpperCase()}`;
}

/**
 * The platform id of the send another node forwarded under `forwardId` (src/http/plugins/forward.ts): `3EB0` + 18
 * uppercase hex of HMAC-SHA256(instance id, forward id), the shape of the engines' own ids. Every forward of one
 * request gets the same id, so its job is stored once (docs/decisions/0008-leases-and-fencing.md).
 */
export function forwardedMessageId(instanceId: string, forwardId: string): string {
  return `3EB0${createHmac('sha256', instanceId).update(forwardId).digest('hex').slice(0, 18).toUpperCase()}`;
}

/** The id a send must have: {@link forwardedMessageId} for a forwarded one, none (a new id) otherwise. */
function fixedIdOf(instance: Instance, origin: SendOrigin): string | undefined {
  return origin.forwardId === undefined ? undefined : forwardedMessageId(instance.id, origin.forwardId);
}

/** How a send arrived, when it matters (options of {@link MessagingService.send} and `enqueue`). */
export interface SendOrigin {
  /**
   * The forward id of a send another node forwarded: its job is keyed by it, and a second forward of the same
   * request (its connection closed before the answer) answers for the job stored the first time.
   */
  forwardId?: string | undefined;
  /**
   * Aborts when the client went away (src/http/client-gone.ts): a synchronous send stops waiting for its outcome,
   * which is then recorded as a `MessageStatus` event, as a queued send's is.
   */
  signal?: WaitSignal | undefined;
}

/**
 * The messaging family (docs/api.md#messages, docs/decisions/0024-engines-and-data-flow.md,
 * docs/decisions/0017-messages-and-media.md): sends, reactions and read receipts. Every method needs the instance
 * logged in and connected (@throws DomainError not_logged_in / not_connected,
 * docs/decisions/0001-envelope-and-error-codes.md), and returns only once the resulting event is recorded (the engine
 * awaits the recorder for sends; `markRead` records its own).
 */
export class MessagingService {
  readonly #store: Store;
  readonly #sessions: SessionManager;
  readonly #registrations: RegistrationCache;
  readonly #recorder: EventRecorder;
  readonly #queue: SendQueue;
  readonly #clock: Clock;

  constructor(deps: {
    store: Store;
    sessions: SessionManager;
    registrations: RegistrationCache;
    recorder: EventRecorder;
    queue: SendQueue;
    clock: Clock;
  }) {
    this.#store = deps.store;
    this.#sessions = deps.sessions;
    this.#registrations = deps.registrations;
    this.#recorder = deps.recorder;
    this.#queue = deps.queue;
    this.#clock = deps.clock;
  }

  /**
   * A synchronous send (the default answer): the session (409 not logged in or disconnected, 503 while it
   * reconnects), the recipient's registration (422), the quoted message's chat (400), then the content — built only
   * now, so media is fetched only for a send that can go out. The message is stored as a `pending` job under a new
   * platform id before its relay, then relayed at once when the queue is idle and unpaced, else in its turn;
   * resolves after the platform's ack and the message's recording (docs/decisions/0009-sends-as-jobs.md).
   * @throws DomainError not_registered `recipient <phone> is not registered on the platform`; invalid `id must name
   *   a message in this chat` (a quoted message stored in another chat); the relay's error (the job is then `failed`);
   *   conflict `LOGGED_OUT_BEFORE_RELAY` when the account logged out (or another linked) while the send was accepted:
   *   nothing stored, or, when the logout came while its job was stored, the job canceled
   *   (docs/decisions/0074-logout-cancels-pending-sends.md).
   */
  async send(
    instance: Instance,
    input: SendInput,
    content: () => Promise<OutgoingContent> | OutgoingContent,
    origin: SendOrigin = {},
  ): Promise<SentMessage> {
    const fixedId = fixedIdOf(instance, origin);
    // Looked for before the session is asked: a job stored by an earlier run of the same request (a forward, or an
    // idempotent retry) is answered whatever the session's state now, never refused as if nothing was sent.
    const earlier = await this.#storedUnder(instance, fixedId);
    if (earlier) return this.#outcomeOf(earlier, origin.signal);
    const session = this.#sessions.ready(instance);
    const accepted = session.state();
    await requireRegistered(this.#registrations, instance, session, input.phone);
    await this.#requireQuotable(instance, input);
    const job = await this.#job(instance, session, input, await content(), 'sync', null, fixedId);
    // The account logged out (or another linked) while the send was accepted (its content built): nothing is stored.
    // Stored, the job could be relayed at once, or claimed by the queue's drain, through the account linked now
    // before any cancel of it (docs/decisions/0074-logout-cancels-pending-sends.md).
    if (!sameAccount(session, accepted)) throw loggedOutBeforeRelay();
    let outcome: () => Promise<SentMessage>;
    try {
      outcome = await this.#queue.storeSync(session, job, origin.signal, () =>
        sameAccount(session, accepted),
      );
    } catch (error) {
      // Stored past its sync wait and failed unsent (the store answered late): that is this request's answer.
      if (error instanceof DomainError && error.code === 'timeout') throw error;
      // The same forward stored meanwhile (its first try still running here): answer for that job.
      return this.#outcomeOf(await this.#storedEarlier(job, fixedId, error), origin.signal);
    }
    if (sameAccount(session, accepted)) return outcome();
    // The account logged out while the job was stored, after the logout canceled the account's pending sends:
    // stored `pending` (never relayed at once from another account), it is canceled here before its wait wakes the
    // queue, its request answered as the logout answers one (docs/decisions/0074-logout-cancels-pending-sends.md).
    // One stored claimed before the logout fails on the session logged out.
    const canceled = await this.#cancelPending(instance, job.id, loggedOutBeforeRelay());
    if (canceled?.canceled) throw loggedOutBeforeRelay();
    return outcome();
  }

  /** The job an earlier forward of the same request stored under `id` (the forward's fixed id), if any. */
  async #storedUnder(instance: Instance, id: string | undefined): Promise<SendJob | undefined> {
    return id === undefined ? undefined : findSendJob(this.#store.db, instance.id, id);
  }

  /**
   * The job stored under `job`'s id by an earlier forward of the same request, when storing `job` failed; else
   * `error` is thrown again.
   */
  async #storedEarlier(job: NewSendJob, fixedId: string | undefined, error: unknown): Promise<SendJob> {
    if (fixedId === undefined) throw error;
    const earlier = await findSendJob(this.#store.db, job.instanceId, job.id).catch(() => undefined);
    if (!earlier) throw error;
    return earlier;
  }

  /**
   * What a synchronous send answers for a job stored by an earlier forward of the same request (src/sends/outcomes.ts);
   * its wait is withdrawn when `gone` (the client went away) aborts, as a first forward's is.
   */
  #outcomeOf(job: SendJob, gone: WaitSignal | undefined): Promise<SentMessage> {
    return storedOutcome(
      job,
      (waited, signal) =>
        this.#queue.waitForStored(waited, gone === undefined ? signal : eitherSignal(signal, gone)),
      () => findSendJob(this.#store.db, job.instanceId, job.id),
    );
  }

  /**
   * An asynchronous send (`Prefer: respond-async` or `sendAt`): stored as a `pending` job under a new platform id
   * and answered at once; the queue relays it when due (`sendAt`, epoch ms, at most 30 days ahead), when the pace
   * allows and once the session is connected, and records a `MessageStatus` event with the outcome. Needs the
   * account linked (409 otherwise); a one-to-one recipient is checked now when the session is connected (422).
   * @throws DomainError invalid when `sendAt` is not in the future or more than 30 days ahead, and `id must name a
   *   message in this chat` (a quoted message stored in another chat); not_logged_in when the account logged out (or
   *   another linked) while the send was accepted: nothing stored when it was seen before the store, else its job
   *   canceled once stored (docs/decisions/0074-logout-cancels-pending-sends.md).
   */
  async enqueue(
    instance: Instance,
    input: SendInput,
    content: () => Promise<OutgoingContent> | OutgoingContent,
    sendAt: number | null,
    origin: SendOrigin = {},
  ): Promise<QueuedSend> {
    const now = this.#clock();
    const fixedId = fixedIdOf(instance, origin);
    // A second forward of the same request: the job is accepted already.
    const earlier = await this.#storedUnder(instance, fixedId);
    if (earlier) return { id: earlier.id, status: 'pending', sendAt: earlier.sendAt };
    if (sendAt !== null && sendAt <= now) throw errors.badRequest('sendAt must be in the future');
    if (sendAt !== null && sendAt > now + MAX_SCHEDULE_AHEAD_MS) {
      throw errors.badRequest('sendAt must be at most 30 days ahead');
    }
    const session = this.#sessions.existing(instance.id);
    const state = session?.state();
    if (!(state ? state.loggedIn : instance.jid !== null)) throw errors.notLoggedIn();
    if (session && state?.connected)
      await requireRegistered(this.#registrations, instance, session, input.phone);
    await this.#requireQuotable(instance, input);
    const job = await this.#job(instance, session, input, await content(), 'async', sendAt, fixedId);
    // The account logged out (or another linked) while the content was built: nothing is stored, so a drain of the
    // account linked since has nothing to claim (docs/decisions/0074-logout-cancels-pending-sends.md).
    if (session !== undefined && state !== undefined && !sameAccount(session, state))
      throw errors.notLoggedIn();
    let written: Awaited<ReturnType<SendQueue['store']>>;
    try {
      written = await this.#queue.store(job);
    } catch (error) {
      const earlier = await this.#storedEarlier(job, fixedId, error);
      return { id: earlier.id, status: 'pending', sendAt: earlier.sendAt };
    }
    // A logout committed since the send was accepted, before its insert: nothing stored (unless an earlier forward of
    // the same request stored it), as a logout seen before the store answers
    // (docs/decisions/0074-logout-cancels-pending-sends.md).
    if (written === 'refused') {
      const earlier = await this.#storedUnder(instance, fixedId);
      if (earlier) return { id: earlier.id, status: 'pending', sendAt: earlier.sendAt };
      throw errors.notLoggedIn();
    }
    // The account logged out (or another linked) while the job was stored: the logout canceled the account's
    // pending sends before this job was stored, so it is canceled here, never relayed from the account linked next
    // (docs/decisions/0074-logout-cancels-pending-sends.md). The session's state changes before its logout is recorded,
    // so a logout whose cancel came after the store is seen here or has canceled the job itself.
    if (session !== undefined && state !== undefined && !sameAccount(session, state)) {
      await this.#cancelPending(instance, job.id, loggedOutBeforeRelay());
      throw errors.notLoggedIn();
    }
    if (sendAt === null) this.#queue.submitted(instance.id);
    else this.#queue.scheduled(instance.id, sendAt);
    return { id: job.id, status: 'pending', sendAt };
  }

  /**
   * Cancels a `pending` (queued or scheduled) send: it becomes `canceled` and is never relayed; a `MessageStatus`
   * event records it. Canceling a canceled send answers the same again.
   * @throws DomainError not_found `message not found`; conflict `message already sent` once relayed (or being
   *   relayed), `message already failed` for a failed one.
   */
  async cancel(instance: Instance, id: string): Promise<CanceledSend> {
    const canceledError = errors.conflict('the message was canceled before its relay');
    const result = await this.#cancelPending(instance, id, canceledError);
    if (!result) {
      const stored = await findStoredMessage(this.#store.db, instance.id, id);
      if (stored?.source.isFromMe) throw errors.conflict('message already sent');
      throw errors.notFound('message not found');
    }
    const { job, canceled } = result;
    if (!canceled && (job.status === 'sending' || job.status === 'sent'))
      throw errors.conflict('message already sent');
    if (!canceled && job.status === 'failed') throw errors.conflict('message already failed');
    return { id, status: 'canceled' };
  }

  /**
   * Cancels job `id` while it is `pending` (src/store/send-jobs.ts `cancelSendJob`), with its `MessageStatus canceled`
   * event in the same transaction, and tells the queue: a request waiting for the job is answered with `error`.
   * @returns what `cancelSendJob` returns (undefined: no such job). @throws the store's error.
   */
  async #cancelPending(
    instance: Instance,
    id: string,
    error: DomainError,
  ): Promise<{ job: SendJob; canceled: boolean } | undefined> {
    const at = this.#clock();
    // The job's `canceled` and its event commit together (docs/decisions/0076-status-with-its-write.md).
    const result = await this.#queue.recordWith(
      instance.id,
      async (trx) => {
        const cancel = await cancelSendJob(trx, instance.id, id, at);
        if (!cancel?.canceled) return { result: cancel, reports: [] };
        // A job handed back after an unconfirmed relay may hold receipts: they follow its outcome
        // (docs/decisions/0104-receipts-before-their-send.md).
        const events = await takeHeldReceipts(trx, instance.id, [id]);
        return { result: cancel, reports: [messageReport(id, 'canceled', at)], events };
      },
      { id, error },
    );
    if (result?.canceled) this.#queue.canceled(result.job, error);
    return result;
  }

  /** The job of one send, not yet stored. */
  async #job(
    instance: Instance,
    session: EngineSession | undefined,
    input: SendInput,
    built: OutgoingContent,
    mode: 'sync' | 'async',
    sendAt: number | null,
    /** The id a forwarded send must have ({@link forwardedMessageId}); otherwise a new one. */
    fixedId: string | undefined,
  ): Promise<NewSendJob> {
    const now = this.#clock();
    // The account generation the job is stored under: its insert stores nothing once a logout moved it
    // (docs/decisions/0074-logout-cancels-pending-sends.md). Read before the acceptance's last look at the session:
    // a logout recorded before this read changed the session's state before it, and that look sees it.
    const account = await this.#queue.accountGeneration(instance.id, session);
    const id =
      fixedId ??
      (session
        ? await withTimeout(session.messageId(), MESSAGE_ID_WAIT_MS, () => errors.storeUnavailable())
        : fallbackMessageId());
    const to = chatJidOf(input.phone);
    const message = {
      to,
      content: built,
      ...(input.quotedId === undefined ? {} : { quotedId: input.quotedId }),
      ...(input.mentions?.length ? { mentions: input.mentions.map(userJid) } : {}),
      ...(input.forwardingScore ? { forwardingScore: input.forwardingScore } : {}),
      ...(input.statusJidList ? { statusJidList: input.statusJidList.map(userJid) } : {}),
    };
    return {
      instanceId: instance.id,
      id,
      seq: nextSeq(now),
      chat: to,
      kind: built.kind,
      payload: encodeSendPayload(message),
      mode,
      // A scheduled send is due at the time its client asked for; any other at once, on the store's clock, so every
      // node finds it due now whatever its wall clock (docs/decisions/0112-send-due-times-on-the-store-clock.md).
      runAt: sendAt ?? this.#queue.dueNow(),
      sendAt,
      maxAttempts: mode === 'sync' ? SYNC_MAX_ATTEMPTS : ASYNC_MAX_ATTEMPTS,
      now,
      account,
    };
  }

  /**
   * Reacts to a message. In a group, the target's author is the named sender, else the stored message's sender
   * (the platform needs it for others' messages).
   * @throws DomainError not_registered for an unregistered one-to-one recipient; engine errors as raised.
   */
  async react(instance: Instance, input: ReactInput): Promise<SentMessage> {
    const session = this.#sessions.ready(instance);
    await requireRegistered(this.#registrations, instance, session, input.phone);
    let author: Jid | undefined;
    if (input.senderPhone !== undefined) author = userJid(input.senderPhone);
    else if (isGroupAddress(input.phone) && !input.fromMe) {
      author = (await findStoredMessage(this.#store.db, instance.id, input.targetId))?.source.sender;
    }
    return session.react(chatJidOf(input.phone), input.targetId, input.fromMe, input.emoji, author);
  }

  /**
   * Sends read receipts for received messages `ids` of chat `chatPhone` (`senderPhone`: their author, required
   * in groups), then records a `read` event so the messages move to `read` through the event pipeline. A
   * `<lid>@lid` chat is recorded under the phone JID parley keeps for the LID, where received messages are stored
   * (docs/decisions/0038-lid-mappings.md). A one-to-one chat's number is checked first, as a send's is
   * (registration-check.ts).
   * @throws DomainError not_registered for an unregistered one-to-one chat; engine errors as raised.
   */
  async markRead(
    instance: Instance,
    input: { chatPhone: string; ids: readonly string[]; senderPhone?: string | undefined },
  ): Promise<void> {
    const session = this.#sessions.ready(instance);
    await requireRegistered(this.#registrations, instance, session, input.chatPhone);
    const chat = chatJidOf(input.chatPhone);
    const ids = [...new Set(input.ids)];
    await session.markRead(
      chat,
      ids,
      input.senderPhone === undefined ? undefined : userJid(input.senderPhone),
    );
    const stored = await storedChatOf(this.#store.db, instance.id, chat);
    await this.#recorder.record(instance.id, { type: 'read', chat: stored, messageIds: ids });
  }

  /**
   * Checks that the message a send quotes (`quotedId`, the `id` field) is one of the send's chat
   * (docs/decisions/0017-messages-and-media.md): the quote shows the stored message's words and author, so a message
   * of another chat would be shown as said in this one. A LID chat and the phone JID parley keeps for it are one chat
   * (docs/decisions/0038-lid-mappings.md). An id parley never stored passes: the reply carries the id alone.
   * @throws DomainError invalid `id must name a message in this chat`.
   */
  async #requireQuotable(instance: Instance, input: SendInput): Promise<void> {
    if (input.quotedId === undefined) return;
    const quoted = await findStoredMessage(this.#store.db, instance.id, input.quotedId);
    if (!quoted) return;
    const chat = chatJidOf(input.phone);
    if (quoted.source.chat === chat) return;
    const [stored, destination] = await Promise.all([
      storedChatOf(this.#store.db, instance.id, quoted.source.chat),
      storedChatOf(this.#store.db, instance.id, chat),
    ]);
    if (stored !== destination) throw errors.quotedElsewhere();
  }
}
