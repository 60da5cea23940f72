import { createHmac } from 'node:crypto';
import { BoundedMap } from '../../domain/bounded-map.ts';
import type { CallStatus, EngineCall } from '../../domain/calls.ts';
import { DomainError, errors } from '../../domain/errors.ts';
import { userJid } from '../../domain/messages.ts';
import type { SandboxCallInput } from '../engine.ts';
import type { SandboxAccount } from './account.ts';
import { send } from './messaging.ts';
import { isBlocked } from './profile.ts';

/**
 * Calls on the simulated platform (docs/decisions/0026-chats-edits-polls-and-calls.md): a simulated user calls the
 * account. Nobody answers a sandbox call, so it ends as `missed` unless the instance rejects calls automatically;
 * then it ends as `rejected` and the reject message (if any) is sent to the caller as an ordinary text message of the
 * account. A call made with `ring: true` keeps ringing until `rejectCall` declines it
 * (docs/decisions/0041-forward-calls-channels.md). A blocked user's call never reaches the account.
 */

/** Calls a session remembers (the latest ones), like the live engine. */
const REMEMBERED_CALLS = 1_000;

/**
 * A session's calls by id (`SandboxAccount.calls`), empty: at most {@link REMEMBERED_CALLS}, the call whose last
 * event is the oldest dropped first.
 */
export function rememberedCalls(): BoundedMap<string, EngineCall> {
  return new BoundedMap(REMEMBERED_CALLS);
}

/**
 * Keeps `call` as its id's last status, the newest of the session's calls, and records its `call` event. Kept
 * before the event is recorded, so that a concurrent reject finds the call no longer ringing; when the event is not
 * recorded the call's status before it is kept again (a new call forgotten), as the sandbox's relay is its
 * recording (docs/decisions/0024-engines-and-data-flow.md): kept, a reject made again would be refused as done and
 * its event never recorded.
 * @throws the recording's error.
 */
async function report(account: SandboxAccount, call: EngineCall): Promise<void> {
  const before = account.calls.get(call.id);
  account.calls.set(call.id, call);
  try {
    await account.context.emit({ type: 'call', call });
  } catch (error) {
    if (account.calls.get(call.id) === call) {
      if (before === undefined) account.calls.delete(call.id);
      else account.calls.set(call.id, before);
    }
    throw error;
  }
}

/** Id of the `n`-th call of an instance: 32 uppercase hex characters, like the platform's call ids. */
export function callIdFor(instanceId: string, n: number): string {
  return createHmac('sha256', 'parley-sandbox-ids')
    .update(`${instanceId}:call:${n}`)
    .digest('hex')
    .slice(0, 32)
    .toUpperCase();
}

/**
 * Helper: user `phone` calls the account (see `SandboxControls.call` in src/engines/sandbox-controls.ts). A call from
 * a user the account blocked is answered with its id and status `missed` and never arrives: no event, no reject
 * message (docs/decisions/0039-profile-privacy-blocklist.md).
 * @throws DomainError invalid when `phone` is the account; not_registered when the caller is not registered;
 *   not_logged_in / not_connected before login.
 */
export async function incomingCall(
  account: SandboxAccount,
  input: SandboxCallInput,
): Promise<{ id: string; status: 'missed' | 'rejected' | 'ringing' }> {
  const creds = await account.ready();
  if (input.phone === creds.phone) throw errors.badRequest('phone must be another user than this instance');
  const caller = await account.world.user(input.phone);
  if (!caller.registered) {
    throw new DomainError('not_registered', `phone ${input.phone} is not registered on the platform`);
  }
  const { context } = account;
  const id = callIdFor(context.instanceId, await account.sequence.next());
  // A blocked user's call never reaches the account (docs/decisions/0039-profile-privacy-blocklist.md): no event, no
  // automatic reject nor its message; the caller hears it ring out unanswered.
  if (await isBlocked(account, creds, input.phone)) return { id, status: 'missed' };
  const from = userJid(input.phone);
  const event = async (status: CallStatus, extra: Partial<EngineCall> = {}) => {
    const call: EngineCall = {
      id,
      from,
      status,
      isVideo: input.video === true,
      isGroup: false,
      timestamp: context.clock(),
      ...extra,
    };
    await report(account, call);
  };
  await event('offer');
  const settings = (await context.callSettings?.()) ?? { reject: false, message: null };
  if (input.ring === true && !settings.reject) return { id, status: 'ringing' };
  if (!settings.reject) {
    await event('missed');
    return { id, status: 'missed' };
  }
  await event('rejected', { autoRejected: true });
  if (settings.message !== null) {
    await send(account, { to: from, content: { kind: 'text', text: settings.message, linkPreview: false } });
  }
  return { id, status: 'rejected' };
}

/**
 * The account declines ringing call `id` → `call` event `rejected` (not `autoRejected`); resolves with its call.
 * @throws DomainError not_found `call <id> not found` when this session has no such call; conflict `call <id> is no
 *   longer ringing (<status>)`; not_logged_in / not_connected before login.
 */
export async function rejectCall(account: SandboxAccount, id: string): Promise<EngineCall> {
  await account.ready();
  const known = account.calls.get(id);
  if (!known) throw errors.notFound(`call ${id} not found`);
  if (known.status !== 'offer') throw errors.conflict(`call ${id} is no longer ringing (${known.status})`);
  const call: EngineCall = { ...known, status: 'rejected', timestamp: account.context.clock() };
  await report(account, call);
  return call;
}
