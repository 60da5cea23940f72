import type { ChatLabelChange, Label, LabelEdit } from '../../domain/labels.ts';
import type { EngineEvent, Jid } from '../../domain/messages.ts';
import type { AuthEntry } from '../engine.ts';
import { ACCOUNT_CATEGORY, type SandboxAccount } from './account.ts';
import { sandboxChatKey } from './lids.ts';

/**
 * The account's business labels on the simulated platform (docs/decisions/0045-business-labels.md): its labels and
 * the labels on each chat. Kept in the session's auth port (category `sandbox-account`, ids `labels:<phone>` and
 * `chat-labels:<phone>`) beside the chat state (chat-actions.ts), so they survive restarts and a logout, as the
 * platform keeps them for the account. Each change is emitted as a `label` or `chat-label` event, as the live
 * engine records what the platform syncs, so parley's store answers `GET /v1/labels`; a login records them all again
 * ({@link replayLabels}).
 *
 * The account is a business account when its own number is defined in the simulated world with a `verifiedName`
 * (`POST /v1/sandbox/users`), as the platform simulator's business accounts are (docs/simulator.md).
 */

const CATEGORY = ACCOUNT_CATEGORY;

/** The account's labels and chat labels: labels by id, and per chat JID the ids of its labels, ascending. */
export interface SandboxLabelsState {
  labels: Record<string, Label>;
  chats: Record<Jid, string[]>;
}

async function read<T>(account: SandboxAccount, id: string, fallback: T): Promise<T> {
  const value = (await account.context.auth.get(CATEGORY, [id])).get(id);
  return value === undefined ? fallback : (JSON.parse(value) as T);
}

/**
 * The entry storing `value` under `id` of the account's state, written with the event that reports the change
 * (docs/decisions/0077-state-with-its-events.md).
 */
function entry(id: string, value: unknown): AuthEntry {
  return { category: CATEGORY, id, value: JSON.stringify(value) };
}

/** Orders label ids numerically. */
function byNumber(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** The account's labels and chat labels (empty for an account that never labelled anything). */
export async function labelsState(account: SandboxAccount): Promise<SandboxLabelsState> {
  const { phone } = await account.ready();
  return {
    labels: await read<Record<string, Label>>(account, `labels:${phone}`, {}),
    chats: await read<Record<Jid, string[]>>(account, `chat-labels:${phone}`, {}),
  };
}

/** Whether the account's own number is defined with a verified business name. */
export async function isBusiness(account: SandboxAccount): Promise<boolean> {
  const { phone } = await account.ready();
  return (await account.world.user(phone)).verifiedName !== '';
}

/** Creates, changes or (`deleted`) deletes label `edit.id`; a deleted label comes off every chat. */
export async function editLabel(account: SandboxAccount, edit: LabelEdit): Promise<void> {
  const { phone } = await account.ready();
  const labels = await read<Record<string, Label>>(account, `labels:${phone}`, {});
  const { deleted, ...label } = edit;
  const entries: AuthEntry[] = [];
  if (deleted) {
    delete labels[edit.id];
    const chats = await read<Record<Jid, string[]>>(account, `chat-labels:${phone}`, {});
    for (const [chat, ids] of Object.entries(chats)) {
      const rest = ids.filter((id) => id !== edit.id);
      if (rest.length > 0) chats[chat] = rest;
      else delete chats[chat];
    }
    entries.push(entry(`chat-labels:${phone}`, chats));
  } else {
    labels[edit.id] = label;
  }
  entries.push(entry(`labels:${phone}`, labels));
  await account.context.emitWith(entries, [{ type: 'label', label: edit }]);
}

/**
 * Puts label `labelId` on chat `chat` (`labeled`, kept under the name given, as the event reports it) or takes it
 * off the chat under every name it is kept by: a user's `<lid>@lid` and phone JID name one chat (lids.ts
 * `sandboxChatKey`), and parley names it by the phone JID once it knows the pair, so a label put on by LID comes off
 * by either. Idempotent.
 */
export async function labelChat(account: SandboxAccount, change: ChatLabelChange): Promise<void> {
  const { phone } = await account.ready();
  const chats = await read<Record<Jid, string[]>>(account, `chat-labels:${phone}`, {});
  const key = sandboxChatKey(change.chat);
  const names = change.labeled
    ? [change.chat]
    : Object.keys(chats).filter((chat) => sandboxChatKey(chat) === key);
  for (const chat of names) {
    const ids = new Set(chats[chat] ?? []);
    if (change.labeled) ids.add(change.labelId);
    else ids.delete(change.labelId);
    if (ids.size > 0) chats[chat] = [...ids].sort(byNumber);
    else delete chats[chat];
  }
  await account.context.emitWith([entry(`chat-labels:${phone}`, chats)], [{ type: 'chat-label', change }]);
}

/**
 * The account `phone`'s labels and chat labels as `label` and `chat-label` events, as the live platform's first app
 * state sync of a newly linked device brings them: the sandbox's login records them with its `connection` event
 * (lifecycle.ts `scan`), so parley knows them again after a logout cleared them, and a login is never kept without
 * them (docs/decisions/0045-business-labels.md). Read before the login, so it does not need the account logged in.
 */
export async function replayLabels(account: SandboxAccount, phone: string): Promise<EngineEvent[]> {
  const labels = await read<Record<string, Label>>(account, `labels:${phone}`, {});
  const chats = await read<Record<Jid, string[]>>(account, `chat-labels:${phone}`, {});
  const events: EngineEvent[] = [];
  for (const id of Object.keys(labels).sort(byNumber)) {
    const label = labels[id];
    if (label) events.push({ type: 'label', label: { ...label, deleted: false } });
  }
  for (const [chat, ids] of Object.entries(chats))
    for (const labelId of ids)
      events.push({ type: 'chat-label', change: { chat: chat as Jid, labelId, labeled: true } });
  return events;
}
