import type { Clock } from '../domain/clock.ts';

/** The queue state of one instance in this process (src/sends/queue.ts). Times are epoch milliseconds. */
export interface Runner {
  /** A drain of the instance's queue is running. */
  draining: boolean;
  /** Something woke the queue during the drain: it drains once more. */
  again: boolean;
  /**
   * Every `sending` job was handed back once since this process took the instance, and since the last hand-back
   * asked for ({@link askHandBack}).
   */
  reclaimed: boolean;
  /**
   * How many hand-backs were asked for ({@link askHandBack}): a drain whose hand-back ran while another was asked for
   * (a login committed, a relay left its job unconfirmed) runs one more before its next claim (drain.ts).
   */
  handBacksAsked: number;
  /**
   * The last drain ended with nothing due (no job waiting for its retry in its place either, drain.ts) since this
   * process took the instance, and the drain has claimed no job since: {@link Runner.queued} is known. A claim clears
   * it until a pass of the drain ends with nothing due again, so a synchronous send waits behind the claimed job's
   * relay and, when that fails, behind its retry (sync-relay.ts). A drain that only looks for work leaves it, so a
   * burst of synchronous sends is not turned into the queue's one-at-a-time relays by the drain a wake starts
   * (docs/decisions/0013-pacing.md).
   */
  idle: boolean;
  /**
   * When {@link Runner.idle} ends by itself (epoch ms, on the store's clock, as due times are:
   * docs/decisions/0112-send-due-times-on-the-store-clock.md): the `run_at` of the instance's first pending job, a
   * scheduled send or one moved behind, as the last drain read it or an acceptance here told it (queue.ts `SendQueue.scheduled`);
   * infinite when none waits. From then that job is due, and a synchronous send accepted after it waits behind it even
   * before the queue's wake for it has run (sync-relay.ts).
   */
  idleUntil: number;
  /** Jobs submitted for the queue (due now) and not yet claimed, as this process knows them. */
  queued: number;
  /**
   * Synchronous sends this process decided to relay at once (sync-relay.ts), from that decision until their relay
   * ended or they were left to the queue: the drain claims nothing meanwhile, so no job that became due or was accepted
   * after them goes out beside them and perhaps first (docs/decisions/0013-pacing.md).
   */
  immediate: number;
  /** A drain held its claim back for {@link Runner.immediate} relays: the last one to end wakes the queue. */
  deferred: boolean;
  /**
   * When the drain next looks whether the new-chats window has slots for the sends waiting for one (epoch ms;
   * new-chat-slots.ts `releaseFreedSlots`): 0 at once (a new hold on the instance, a pace change, a released send
   * claimed or canceled), the time the window frees its next slot, or infinite while nothing could free one.
   */
  slotCheckAt: number;
  /**
   * The sends waiting for a new-chat slot that this process released and has not claimed yet, each with the user whose
   * slot it went on (src/store/send-job-slots.ts `ReleasedSlotWaiter.user`: its chat, or the phone JID of the pair kept
   * for its LID when it was released): held for a slot again, such a send keeps its place
   * (docs/decisions/0013-pacing.md).
   */
  slotsReleased: Map<string, string>;
  /**
   * The chats a slot is set aside for, each named by its user as in {@link Runner.slotsReleased} (a user written to by
   * number and by LID is one): released (all their waiting sends together, one slot per user), none of their sends
   * claimed yet. A look before their claims releases no more than the slots freed; the first claim of a user's sends
   * ends its slot's set-aside (that relay opens the chat, or leaves it to be looked at again), so the user's other
   * sends, due behind it, hold none (docs/decisions/0013-pacing.md).
   */
  slotChats: Set<string>;
  /** The pending wake set by {@link Runners.schedule}, if any. */
  timer: NodeJS.Timeout | undefined;
  /** When that wake is due. */
  timerAt: number;
  /** Earliest time the pace allows the next relay. */
  nextAllowedAt: number;
  /**
   * When the last relay the pace counts went out (relay.ts `JobRelay.paced`), or undefined before the first one since
   * this process took the instance: a new pace counts its interval from it (queue.ts `SendQueue.setPacing`).
   */
  lastRelayAt: number | undefined;
  /**
   * A logout of the instance's account committed in this process since its last login: the next login forgets the
   * last relay again ({@link forgetLastRelay}), in case a relay of that account still under way at the logout ended
   * after it.
   */
  loggedOut: boolean;
  /**
   * The jobs this process holds for a relay that has not ended: an immediate synchronous send's from before its row
   * is stored claimed, any other's from its claim. Handing `sending` jobs back leaves these, and hands back again once
   * such a job's relay ended without writing it ({@link Runners.release}).
   */
  relaying: RelayHolds;
  /** Logins of the instance committed in this process (queue.ts `afterCommit` counts them). */
  logins: number;
  /**
   * {@link logins} when a relay whose outcome is unknown began (relay.ts: the platform never acknowledged it and its
   * connection was ended, `UnconfirmedRelayError`), or undefined: while no login has committed since
   * ({@link awaitsLogin}), the queue claims nothing and relays nothing at once, so the job that relay left `sending`
   * goes out again first, on the next connection, under its id, before any send accepted after it
   * (docs/decisions/0009-sends-as-jobs.md).
   */
  unconfirmedAt: number | undefined;
}

/**
 * Asks for the instance's `sending` jobs no relay of this process holds to be handed back before the queue's next
 * claim (drain.ts), and holds synchronous sends from relaying at once until then (sync-relay.ts).
 */
export function askHandBack(runner: Runner): void {
  runner.reclaimed = false;
  runner.handBacksAsked += 1;
}

/**
 * True while the instance's queue waits for a login after a relay whose outcome is unknown ({@link
 * Runner.unconfirmedAt}): a relay now would go out on the connection taken for dead, or before that job.
 */
export function awaitsLogin(runner: Runner): boolean {
  return runner.unconfirmedAt !== undefined && runner.unconfirmedAt === runner.logins;
}

/**
 * True when `runner`'s memory alone says the instance has no job due at `now` (epoch ms, on the store's clock) nor
 * being relayed, so the session status may show no pending sends without a statement
 * (docs/decisions/0111-status-reads-the-queue-it-holds.md): every `sending` job was handed back since this process took the instance ({@link Runner.reclaimed}), no relay's
 * outcome waits for a login, no drain is running, its last pass left nothing due and none was claimed since
 * ({@link Runner.idle}), no job was submitted since ({@link Runner.queued}), no synchronous send is held or relayed at
 * once ({@link Runner.immediate}, {@link Runner.relaying}) and the first scheduled job or retry is not due yet
 * ({@link Runner.idleUntil}). The caller asks it only while this process holds the instance's connected session: then
 * every send of the instance is accepted here (docs/decisions/0008-leases-and-fencing.md) and tells the runner.
 */
export function knownNothingDue(runner: Runner, now: number): boolean {
  return (
    runner.reclaimed &&
    !awaitsLogin(runner) &&
    !runner.draining &&
    runner.idle &&
    runner.queued === 0 &&
    runner.immediate === 0 &&
    runner.relaying.size === 0 &&
    now < runner.idleUntil
  );
}

/**
 * A committed login of the instance (a new hold on it: a restart, a failover or a reconnect, queue.ts `afterCommit`):
 * the `sending` jobs no relay of this process runs are handed back before the next claim ({@link askHandBack}), the
 * last relay of an account that logged out since is forgotten again, the sends waiting for a new-chat slot are looked
 * at again from what the store holds (another node may have released or relayed some since), and a relay whose
 * outcome was unknown no longer holds the queue (the hand-back gives its job back first). What the queue knew of its
 * due jobs is forgotten ({@link Runner.idle}): another node may have held the instance since and accepted sends this
 * process never heard of, so only a pass of the drain that ends with nothing due makes it idle again (neither a
 * synchronous send relayed at once nor the status's count trusts the old hold's memory,
 * docs/decisions/0111-status-reads-the-queue-it-holds.md).
 */
export function afterLogin(runner: Runner): void {
  askHandBack(runner);
  runner.idle = false;
  if (runner.loggedOut) forgetLastRelay(runner);
  runner.loggedOut = false;
  runner.slotCheckAt = 0;
  runner.slotsReleased.clear();
  runner.slotChats.clear();
  runner.logins += 1;
}

/**
 * A committed logout of the instance's account (queue.ts `afterCommit`): its last relay is forgotten (the pace counts
 * from the next account's own), again at the next login in case a relay of it still under way ends after this; the
 * sends it released for new-chat slots were canceled with the account's pending sends.
 */
export function afterLogout(runner: Runner): void {
  forgetLastRelay(runner);
  runner.loggedOut = true;
  runner.slotsReleased.clear();
  runner.slotChats.clear();
}

/**
 * Job `id` was canceled before its claim: when it was a send released for a new-chat slot, and the last released
 * send of its user not claimed (by number or by LID, {@link Runner.slotsReleased}), the slot set aside for that user
 * is free again and the window is looked at in the next pass. @returns true then (the caller wakes the queue).
 */
export function unreleased(runner: Runner, id: string): boolean {
  const user = runner.slotsReleased.get(id);
  if (user === undefined) return false;
  runner.slotsReleased.delete(id);
  if (!runner.slotChats.has(user)) return false;
  for (const other of runner.slotsReleased.values()) if (other === user) return false;
  runner.slotChats.delete(user);
  runner.slotCheckAt = 0;
  return true;
}

/**
 * Job `id` was claimed: when it was a send released for a new-chat slot, it is no longer one released and not
 * claimed, and the slot of the user it was released for ({@link Runner.slotsReleased}: by number or by LID, one
 * slot) is no longer set aside (its relay opens the chat, or leaves the slot to be looked at again), so the window is
 * looked at again after its relay. @returns true then: held for a slot again, it keeps its place.
 */
export function claimedReleased(runner: Runner, id: string): boolean {
  const user = runner.slotsReleased.get(id);
  if (user === undefined) return false;
  runner.slotsReleased.delete(id);
  runner.slotChats.delete(user);
  runner.slotCheckAt = 0;
  return true;
}

/**
 * Ends one of the instance's immediate synchronous relays ({@link Runner.immediate}): its relay ended, or the send was
 * left to the queue after all. @returns true when it was the last one and a drain held its claim back for them: the
 * caller wakes the queue.
 */
export function endImmediate(runner: Runner): boolean {
  runner.immediate = Math.max(0, runner.immediate - 1);
  if (runner.immediate > 0 || !runner.deferred) return false;
  runner.deferred = false;
  return true;
}

/**
 * Forgets the instance's last relay and the next relay time the pace drew from it (`runner` afterwards as before its
 * first relay): the pace counts its interval between the relays of one account, and the account that made that relay
 * logged out (docs/decisions/0013-pacing.md). A scheduled wake is left: it finds the queue free to relay.
 */
export function forgetLastRelay(runner: Runner): void {
  runner.lastRelayAt = undefined;
  runner.nextAllowedAt = 0;
}

/**
 * The ids of the jobs held for a relay, each counted by the holds taken on it: a second request under the same id
 * (a forward tried again) or the relay's own hold inside the request's releases only what it took. A hand-back leaves
 * the jobs held ({@link passOver}); each is remembered as passed over, and as let go unwritten ({@link leave}), until
 * its last hold is given back.
 */
export class RelayHolds {
  readonly #holds = new Map<string, number>();
  /** Jobs held when a hand-back ran: that hand-back left them `sending`. */
  readonly #passed = new Set<string>();
  /** Jobs whose relay let them go unwritten ({@link leave}). */
  readonly #left = new Set<string>();

  /** Takes one hold on job `id`. */
  hold(id: string): void {
    this.#holds.set(id, (this.#holds.get(id) ?? 0) + 1);
  }

  /**
   * Gives back one hold on job `id` (the job is no longer held once every hold is given back).
   * @returns true when that was its last hold, a hand-back passed the job over while it was held ({@link passOver})
   *   and its relay let it go unwritten ({@link leave}): it may be `sending` still, with no relay of it left.
   */
  release(id: string): boolean {
    const left = (this.#holds.get(id) ?? 0) - 1;
    if (left > 0) {
      this.#holds.set(id, left);
      return false;
    }
    this.#holds.delete(id);
    const passed = this.#passed.delete(id);
    return this.#left.delete(id) && passed;
  }

  /**
   * The relay holding job `id` lets it go unwritten: its write found it no longer this node's `sending` job (another
   * holder took it over, docs/decisions/0008-leases-and-fencing.md). Nothing for a job not held.
   */
  leave(id: string): void {
    if (this.#holds.has(id)) this.#left.add(id);
  }

  /** How many jobs are held now. */
  get size(): number {
    return this.#holds.size;
  }

  /** The ids held now. */
  ids(): string[] {
    return [...this.#holds.keys()];
  }

  /** The ids held now, for a hand-back that leaves them: each is passed over until its last hold is given back. */
  passOver(): string[] {
    const ids = this.ids();
    for (const id of ids) this.#passed.add(id);
    return ids;
  }
}

/**
 * The send queue's state of each instance this process sends for, and the timers that wake an instance's queue later
 * (a pace, a pause's end, a scheduled job: docs/decisions/0009-sends-as-jobs.md, docs/decisions/0013-pacing.md).
 */
export class Runners {
  readonly #runners = new Map<string, Runner>();
  readonly #clock: Clock;
  readonly #wake: (instanceId: string) => void;
  readonly #held: (instanceId: string) => boolean;

  /**
   * @param wake called when a scheduled wake of an instance's queue is due, or a hand-back is asked for at once
   *   ({@link release}).
   * @param held whether this process holds the instance's engine session now.
   */
  constructor(clock: Clock, wake: (instanceId: string) => void, held: (instanceId: string) => boolean) {
    this.#clock = clock;
    this.#wake = wake;
    this.#held = held;
  }

  /** The instance's state, made fresh (nothing known, nothing scheduled) on first use. */
  get(instanceId: string): Runner {
    let runner = this.#runners.get(instanceId);
    if (!runner) {
      runner = {
        draining: false,
        again: false,
        reclaimed: false,
        handBacksAsked: 0,
        idle: false,
        idleUntil: Number.POSITIVE_INFINITY,
        queued: 0,
        immediate: 0,
        deferred: false,
        slotCheckAt: 0,
        slotsReleased: new Map(),
        slotChats: new Set(),
        timer: undefined,
        timerAt: 0,
        nextAllowedAt: 0,
        lastRelayAt: undefined,
        loggedOut: false,
        relaying: new RelayHolds(),
        logins: 0,
        unconfirmedAt: undefined,
      };
      this.#runners.set(instanceId, runner);
    }
    return runner;
  }

  /**
   * Gives back one hold of a relay of this process on job `id` of `runner`'s instance (`Runner.relaying`). When the
   * job is no longer held, a hand-back left it while it was (a login committed during its relay) and its relay let it
   * go unwritten (another node had taken it over and died: failures.ts `settleTaken`, `RelayHolds.leave`), the job
   * is `sending` with no relay of it left, which only a hand-back gives back: another is asked for
   * ({@link askHandBack}) and the queue woken, so the next drain hands it back as that login would have, while its
   * request still waits, not at the next login (docs/decisions/0009-sends-as-jobs.md). Only while this process still
   * holds the instance's session: one that lost it leaves the job to the new holder, whose relay may hold it. A relay
   * whose outcome is unknown asks for its hand-back itself (relay.ts).
   */
  release(instanceId: string, runner: Runner, id: string): void {
    if (!runner.relaying.release(id) || !this.#held(instanceId)) return;
    askHandBack(runner);
    // The job it hands back goes first: no synchronous send relays at once past it meanwhile (sync-relay.ts).
    runner.idle = false;
    this.#wake(instanceId);
  }

  /** The instance's state if this process has one, without making it. */
  peek(instanceId: string): Runner | undefined {
    return this.#runners.get(instanceId);
  }

  /**
   * Wakes the instance's queue in `delayMs` milliseconds (capped at about 24.8 days, the timer's limit); keeps an
   * earlier wake already set.
   */
  schedule(instanceId: string, delayMs: number): void {
    const runner = this.get(instanceId);
    const at = this.#clock() + delayMs;
    if (runner.timer && runner.timerAt <= at) return;
    if (runner.timer) clearTimeout(runner.timer);
    runner.timerAt = at;
    runner.timer = setTimeout(
      () => {
        runner.timer = undefined;
        this.#wake(instanceId);
      },
      Math.max(0, Math.min(delayMs, 2_147_000_000)),
    );
    runner.timer.unref();
  }

  /** Cancels every scheduled wake (the queue is stopping). */
  clearTimers(): void {
    for (const runner of this.#runners.values()) if (runner.timer) clearTimeout(runner.timer);
  }
}
