import type { Kysely } from 'kysely';
import type { PacingSettings } from '../domain/sends.ts';
import type { Database } from '../store/schema.ts';
import { releaseSlotWaiters } from '../store/send-job-slots.ts';
import { countNewChatsSince, oldestNewChatSince } from '../store/send-pacing.ts';
import { DAY_MS, newChatSlotFreesAt } from './pause.ts';
import type { Runner, Runners } from './runners.ts';

/**
 * Releases the instance's sends waiting for a new-chat slot by user, as many users as the new-chats-per-day window has
 * slots free at `now` (epoch ms), in the order they wait (docs/decisions/0013-pacing.md; src/store/send-job-slots.ts):
 * the cap (`pacing.newChatsPerDay`) less the users the window counts (src/store/send-pacing.ts `countNewChatsSince`, read up
 * to the cap)
 * less the users released before and none of whose sends is claimed yet (`Runner.slotChats`), all of them when no cap
 * is set. A user (a chat; a LID whose pair is kept is its phone JID's user) takes one slot and all their waiting sends,
 * by number and by LID, are released together: the first relayed opens the chat, the others go to a known chat. A user
 * released again whose slot is still set aside (a pair learned after their first sends were released) takes no second
 * one: the slots left go to the next users. Each released send is due again at its place and claimed in its turn,
 * where the cap is checked again (a send before it may take the slot: it then waits again, in the place it had), so the
 * cap never depends on this count. While a reach-out timelock holds sends that open a chat (`lockUntil`, epoch ms),
 * none is released: the drain looks again at its end. Sets when the drain looks next (`Runner.slotCheckAt`): when the
 * window frees its next slot, with the queue's wake set then, or never while no relay in the window can free one (a
 * released send's claim, a cancel, a pace change or a new hold looks again). One statement with no cap; with one, a
 * count, then the release when a slot is free (again while it found only users set aside already), and the window's
 * oldest relay when it is full.
 * @throws the store's error (the drain tries again in 1 s; `Runner.slotCheckAt` is left as it was, so that pass looks
 *   again).
 */
export async function releaseFreedSlots(
  db: Kysely<Database>,
  runners: Runners,
  instanceId: string,
  runner: Runner,
  pacing: PacingSettings,
  lockUntil: number | undefined,
  now: number,
): Promise<void> {
  if (lockUntil !== undefined && lockUntil > now) {
    runner.slotCheckAt = lockUntil;
    return;
  }
  const cap = pacing.newChatsPerDay;
  if (cap === null) {
    await releaseSlotWaiters(db, instanceId, now);
    runner.slotCheckAt = Number.POSITIVE_INFINITY;
    return;
  }
  const since = now - DAY_MS;
  // Counted up to the cap (at least 1, so a window counting anyone is looked at again when it frees a slot): no slot
  // is free at the cap, and the window's oldest relay is read whenever it counts one.
  const counted = await countNewChatsSince(db, instanceId, since, Math.max(cap, 1));
  let free = cap - counted - runner.slotChats.size;
  while (free > 0) {
    const { released, more } = await releaseSlotWaiters(db, instanceId, now, free);
    for (const { id, user } of released) {
      runner.slotsReleased.set(id, user);
      if (runner.slotChats.has(user)) continue;
      runner.slotChats.add(user);
      free -= 1;
    }
    // Fewer users waited than the slots free: none waits any more, and the next send held for a slot sets the next
    // look.
    if (!more) {
      runner.slotCheckAt = Number.POSITIVE_INFINITY;
      return;
    }
    // Each pass releases at least one send, so this ends: a user whose slot was set aside already freed none.
  }
  const oldest = counted > 0 ? await oldestNewChatSince(db, instanceId, since) : undefined;
  runner.slotCheckAt = oldest === undefined ? Number.POSITIVE_INFINITY : newChatSlotFreesAt(oldest);
  if (oldest !== undefined) runners.schedule(instanceId, Math.max(0, runner.slotCheckAt - now));
}
