import type { WACallEvent, WACallUpdateType } from 'baileys';
import { BoundedMap } from '../../domain/bounded-map.ts';
import type { CallSettings, CallStatus, EngineCall } from '../../domain/calls.ts';
import { errors } from '../../domain/errors.ts';
import type { EngineEvent, OutgoingMessage, SentMessage } from '../../domain/messages.ts';
import type { EngineSessionContext } from '../engine.ts';
import type { JidResolver } from './jid.ts';
import type { SocketLike } from './socket.ts';

/**
 * Calls on a live instance (docs/decisions/0026-chats-edits-polls-and-calls.md): Baileys parses the platform's `call`
 * stanzas (messages-recv.js `handleCall`) into `'call'` events; parley reports them as `call` events and, with the
 * instance's automatic reject on, declines an incoming offer with Baileys' `rejectCall` (a `call` stanza holding
 * `reject`) and sends the reject message to the caller.
 */

/**
 * Parley's status of a Baileys call status: `offer` rings; `timeout` (it rang out) and `terminate` (the caller hung
 * up) before an answer are `missed`; `reject` is `rejected`, `accept` `accepted`. Transport steps (`ringing`,
 * `preaccept`, `transport`, `relaylatency`) are not reported (null).
 */
export function callStatusOf(status: WACallUpdateType): CallStatus | null {
  switch (status) {
    case 'offer':
      return 'offer';
    case 'timeout':
    case 'terminate':
      return 'missed';
    case 'reject':
      return 'rejected';
    case 'accept':
      return 'accepted';
    default:
      return null;
  }
}

/**
 * Longest call id whose events carry their step as `platformId` (with `call/` and `/offer` it fits
 * `recorded_updates.id`, 128 characters); a longer one, which the platform does not send, is recorded without it.
 */
const MAX_CALL_ID = 100;

/**
 * The step of a call status `status`: a call rings (`offer`) and ends once (`end`: `missed`, `rejected` or
 * `accepted`, whichever is reported first).
 */
function stepOf(status: CallStatus): 'offer' | 'end' {
  return status === 'offer' ? 'offer' : 'end';
}

/**
 * Engine event `call` carrying its step as `platformId` (`call/<id>/offer` or `call/<id>/end`), so that the recorder
 * leaves out a step already recorded (src/events/message-copies.ts, docs/decisions/0024-engines-and-data-flow.md):
 * the platform hands a call notification over again, its acknowledgement lost, maybe to a process started since that
 * does not remember the call. Without one for a call id longer than {@link MAX_CALL_ID}. Pure.
 */
export function callEventOf(call: EngineCall): Extract<EngineEvent, { type: 'call' }> {
  if (call.id.length > MAX_CALL_ID) return { type: 'call', call };
  return { type: 'call', call, platformId: `call/${call.id}/${stepOf(call.status)}` };
}

/** What {@link CallHandler} needs from the session. */
export interface CallHandlerDeps {
  context: EngineSessionContext;
  resolver: JidResolver;
  /** Records an event (the listener queue's `record`: logged, never throws). */
  record(event: EngineEvent): Promise<boolean>;
  /** Sends a message through the session's send path (recorded like any send). */
  send(sock: SocketLike, message: OutgoingMessage): Promise<SentMessage>;
}

/** Calls remembered to tell a hang-up after an answer or a reject (not a missed call) from one before it. */
const REMEMBERED_CALLS = 1_000;

/**
 * Turns one session's Baileys call events into `call` events in arrival order, and applies the automatic reject.
 * A call rings (`offer`) and ends once (`missed`, `rejected` or `accepted`): remembers the last status of recent calls
 * (at most {@link REMEMBERED_CALLS}) so that the `terminate` ending an answered or rejected call is not reported as
 * missed, nor an end or an offer after its end, and the call's event while the store has not taken it: a status is
 * reported once its event is recorded (docs/decisions/0024-engines-and-data-flow.md), so the platform's next report of
 * a status whose recording failed records it, and a reject made again records its event. What it remembers is lost
 * with the process: each event carries its step ({@link callEventOf}), which the recorder keeps, so a step the
 * platform hands over again to a process started since is left out there.
 */
export class CallHandler {
  readonly #deps: CallHandlerDeps;
  /** The last status of recent calls by id; the call whose last status is the oldest is forgotten first. */
  readonly #last = new BoundedMap<string, CallStatus>(REMEMBERED_CALLS, {
    onEvict: (id) => {
      this.#ringing.delete(id);
      this.#unrecorded.delete(id);
    },
  });
  /** The event of a call's last status, while its recording failed (kept until the call's status changes). */
  readonly #unrecorded = new Map<string, EngineCall>();
  /** Ringing calls by id: the caller as Baileys names it (what `rejectCall` needs) and the reported call. */
  readonly #ringing = new Map<string, { from: string; call: Omit<EngineCall, 'status'> }>();

  constructor(deps: CallHandlerDeps) {
    this.#deps = deps;
  }

  /** Handles one batch of Baileys `'call'` events from socket `sock`. Never throws: failures are logged. */
  async handle(sock: SocketLike, calls: readonly WACallEvent[]): Promise<void> {
    for (const call of calls) {
      try {
        await this.#one(sock, call);
      } catch (error) {
        this.#deps.context.logger.error({ err: error, event: 'call', id: call.id }, 'handling a call failed');
      }
    }
  }

  async #one(sock: SocketLike, call: WACallEvent): Promise<void> {
    const status = callStatusOf(call.status);
    if (status === null) return;
    const previous = this.#last.get(call.id);
    if (previous !== undefined && previous !== 'offer') {
      // Ended: only the end whose event was not recorded is reported again.
      if (status !== previous || !this.#unrecorded.has(call.id)) return;
    } else if (previous === status && !this.#unrecorded.has(call.id)) return;
    this.#remember(call.id, status);
    const { context, resolver } = this.#deps;
    const from = (await resolver.resolve(call.from, call.callerPn)).jid;
    const base: Omit<EngineCall, 'status'> = {
      id: call.id,
      from,
      isVideo: call.isVideo === true,
      isGroup: call.isGroup === true,
      timestamp:
        call.date instanceof Date && !Number.isNaN(call.date.getTime())
          ? call.date.getTime()
          : context.clock(),
    };
    if (status === 'offer') this.#ringing.set(call.id, { from: call.from, call: base });
    const reported: EngineCall = { ...base, status };
    if (!(await this.#deps.record(callEventOf(reported)))) this.#unreported(reported);
    if (status !== 'offer' || call.isGroup || call.offline) return;
    const settings: CallSettings = (await context.callSettings?.()) ?? { reject: false, message: null };
    if (!settings.reject) return;
    const ringing = this.#ringing.get(call.id);
    // Rejected by a POST /v1/calls/{id}/reject meanwhile (it recorded the `rejected` event), or ended.
    if (!ringing) return;
    await this.#rejecting(sock, call.id, ringing);
    const rejected: EngineCall = {
      ...base,
      status: 'rejected',
      autoRejected: true,
      timestamp: context.clock(),
    };
    if (!(await this.#deps.record(callEventOf(rejected)))) this.#unreported(rejected);
    if (settings.message !== null) {
      await this.#deps.send(sock, {
        to: from,
        content: { kind: 'text', text: settings.message, linkPreview: false },
      });
    }
  }

  /**
   * Declines ringing call `id` on socket `sock` (Baileys `rejectCall(callId, callFrom)`, which waits for the
   * platform's ack) and records the `rejected` event (docs/decisions/0041-forward-calls-channels.md). A call
   * declined whose `rejected` event was not recorded is not declined again: its event is recorded.
   * @throws DomainError not_found `call <id> not found` for a call this session did not see (or forgot);
   *   conflict `call <id> is no longer ringing (<status>)`; Baileys' errors as raised; the recording's error (the
   *   call stays declined, its event kept for the reject made again).
   */
  async reject(sock: SocketLike, id: string): Promise<EngineCall> {
    const last = this.#last.get(id);
    const ringing = this.#ringing.get(id);
    const unrecorded = this.#unrecorded.get(id);
    if (last === undefined) throw errors.notFound(`call ${id} not found`);
    if (last === 'rejected' && unrecorded?.status === 'rejected') return this.#recordRejected(unrecorded);
    if (last !== 'offer' || !ringing) throw errors.conflict(`call ${id} is no longer ringing (${last})`);
    await this.#rejecting(sock, id, ringing);
    return this.#recordRejected({
      ...ringing.call,
      status: 'rejected',
      timestamp: this.#deps.context.clock(),
    });
  }

  /**
   * Records `call`, a reject's event, through the session (raising the recording's error, as a direct call does);
   * when it fails the event is kept for the reject made again (taken meanwhile, so that a concurrent reject does not
   * record it too). @returns `call`.
   */
  async #recordRejected(call: EngineCall): Promise<EngineCall> {
    if (this.#unrecorded.get(call.id) === call) this.#unrecorded.delete(call.id);
    try {
      await this.#deps.context.emit(callEventOf(call));
    } catch (error) {
      this.#unreported(call);
      throw error;
    }
    return call;
  }

  /** Keeps `call`, whose event was not recorded, while its status is the call's last one. */
  #unreported(call: EngineCall): void {
    if (this.#last.get(call.id) === call.status) this.#unrecorded.set(call.id, call);
  }

  /**
   * Declines ringing call `id` with Baileys' `rejectCall`, marking it `rejected` before the platform's ack so that a
   * concurrent reject (another request, or the automatic one) finds it no longer ringing and neither rejects nor
   * records it a second time. When the reject fails the call is ringing again (unless it ended meanwhile).
   * @throws Baileys' errors as raised.
   */
  async #rejecting(
    sock: SocketLike,
    id: string,
    ringing: { from: string; call: Omit<EngineCall, 'status'> },
  ): Promise<void> {
    this.#remember(id, 'rejected');
    try {
      await sock.rejectCall(id, ringing.from);
    } catch (error) {
      if (this.#last.get(id) === 'rejected') {
        this.#last.set(id, 'offer');
        this.#ringing.set(id, ringing);
      }
      throw error;
    }
  }

  /**
   * Keeps `status` as the last of call `id` (a forgotten call's ringing entry goes with it); the event of an earlier
   * status not recorded is dropped.
   */
  #remember(id: string, status: CallStatus): void {
    this.#last.set(id, status);
    this.#unrecorded.delete(id);
    if (status !== 'offer') this.#ringing.delete(id);
  }
}
