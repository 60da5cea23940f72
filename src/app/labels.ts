import { DomainError, errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import { LABEL_COLORS, LABEL_ID, LABEL_NAME_MAX, type Label } from '../domain/labels.ts';
import type { Jid } from '../domain/messages.ts';
import type { EngineSession, LabelsCapability } from '../engines/engine.ts';
import type { SessionManager } from '../sessions/manager.ts';
import type { Store } from '../store/database.ts';
import { findLabel, listChatLabels, listLabels } from '../store/labels.ts';
import { storedChatJid } from './chats.ts';

/** The answer to a non-business account's label change (docs/decisions/0045-business-labels.md). */
export const NOT_BUSINESS = 'this account is not a WhatsApp Business account: labels are a business feature';

/** Input of {@link LabelService.create}: `color` 0 to 19, default 0. */
export interface NewLabel {
  name: string;
  color?: number | undefined;
}

/** Input of {@link LabelService.update}: what to change. */
export interface LabelChange {
  name?: string | undefined;
  color?: number | undefined;
}

/** A chat and the labels on it, in label id order. */
export interface ChatLabels {
  chat: Jid;
  labels: Label[];
}

/**
 * Business labels (docs/api.md#labels, docs/decisions/0045-business-labels.md). Reads answer what parley has seen,
 * kept in the store (`labels`, `chat_labels`: the platform's app state sync and parley's own changes), so they work
 * whatever the session's state. Changes need the instance logged in and connected (@throws DomainError
 * not_logged_in / not_connected / platform_unreachable, as every platform call) and a business account (@throws
 * DomainError conflict {@link NOT_BUSINESS}); they go to the platform through the engine, which records each as an
 * event before it resolves, so the answer reads the store back.
 *
 * The changes of one instance run one at a time, in the order they came (a promise chain per instance in this
 * process): each reads what parley knows (the next label id, whether a name is taken, a chat's labels) and then
 * changes it, so two at once would both pick the same id (docs/decisions/0045-business-labels.md). parley runs one
 * process per store, so a chain in memory is enough.
 */
export class LabelService {
  readonly #sessions: SessionManager;
  readonly #store: Store;
  /** Per instance id, the end of its chain of label changes (removed when the chain runs dry). */
  readonly #queues = new Map<string, Promise<unknown>>();

  constructor(deps: { sessions: SessionManager; store: Store }) {
    this.#sessions = deps.sessions;
    this.#store = deps.store;
  }

  /** The account's labels as parley last saw them, in id order. */
  list(instance: Instance): Promise<Label[]> {
    return listLabels(this.#store.db, instance.id);
  }

  /**
   * Creates a label named `input.name` (trimmed) with colour `input.color` (default 0). Its id is the next number
   * after the highest label id parley knows, as the platform's phones number new labels; the engine first makes
   * sure parley knows every label the account has (`syncLabels`: the live engine syncs them in full once per
   * socket), so the id does not overwrite a label parley never saw.
   * @throws DomainError invalid naming `name` (blank) or `color` (not 0 to 19); conflict when a label of that name
   *   (ignoring case) exists.
   */
  create(instance: Instance, input: NewLabel): Promise<Label> {
    return this.#serial(instance, () => this.#create(instance, input));
  }

  async #create(instance: Instance, input: NewLabel): Promise<Label> {
    const name = labelName(input.name);
    const color = labelColor(input.color ?? 0);
    const labels = await this.#business(instance);
    await labels.syncLabels?.();
    const known = await this.list(instance);
    uniqueName(known, name);
    const label: Label = { id: nextLabelId(known), name, color, predefinedId: null };
    await labels.editLabel({ ...label, deleted: false });
    return label;
  }

  /**
   * Renames and/or recolours label `id`.
   * @throws DomainError invalid naming `id`, `name`, `color`, or when neither is given; not_found `label <id> not
   *   found`; conflict when another label has that name.
   */
  update(instance: Instance, id: string, change: LabelChange): Promise<Label> {
    return this.#serial(instance, () => this.#update(instance, id, change));
  }

  async #update(instance: Instance, id: string, change: LabelChange): Promise<Label> {
    labelId(id, 'id');
    if (change.name === undefined && change.color === undefined)
      throw errors.badRequest('give name or color to change');
    const name = change.name === undefined ? undefined : labelName(change.name);
    const color = change.color === undefined ? undefined : labelColor(change.color);
    const labels = await this.#business(instance);
    const current = await this.#known(instance, id);
    if (name !== undefined)
      uniqueName(
        (await this.list(instance)).filter((l) => l.id !== id),
        name,
      );
    const label: Label = { ...current, name: name ?? current.name, color: color ?? current.color };
    await labels.editLabel({ ...label, deleted: false });
    return label;
  }

  /**
   * Deletes label `id` (the platform's `label_edit` with `deleted`); the label comes off every chat.
   * @throws DomainError invalid naming `id`; not_found `label <id> not found`.
   */
  remove(instance: Instance, id: string): Promise<Label> {
    return this.#serial(instance, () => this.#remove(instance, id));
  }

  async #remove(instance: Instance, id: string): Promise<Label> {
    labelId(id, 'id');
    const labels = await this.#business(instance);
    const current = await this.#known(instance, id);
    await labels.editLabel({ ...current, deleted: true });
    return current;
  }

  /** The labels on the chat `rawChat` names (see {@link storedChatJid}). @throws DomainError invalid naming `jid`. */
  async chatLabels(instance: Instance, rawChat: string): Promise<ChatLabels> {
    const chat = await storedChatJid(this.#store.db, instance.id, rawChat);
    return { chat, labels: await listChatLabels(this.#store.db, instance.id, chat) };
  }

  /**
   * Puts labels `ids` on chat `rawChat` (those already on it stay; `mode` `add`), or makes them its only labels
   * (`set`: the chat's other labels parley knows come off). Resolves with the chat's labels afterwards.
   * @throws DomainError invalid naming `jid`, or `labelIds` (not label ids, or repeated); not_found `label <id> not
   *   found` for an id parley does not know (nothing is changed then).
   */
  labelChat(
    instance: Instance,
    rawChat: string,
    ids: readonly string[],
    mode: 'add' | 'set',
  ): Promise<ChatLabels> {
    return this.#serial(instance, () => this.#labelChat(instance, rawChat, ids, mode));
  }

  async #labelChat(
    instance: Instance,
    rawChat: string,
    ids: readonly string[],
    mode: 'add' | 'set',
  ): Promise<ChatLabels> {
    const chat = await storedChatJid(this.#store.db, instance.id, rawChat);
    for (const id of ids) labelId(id, 'labelIds');
    if (new Set(ids).size !== ids.length) throw errors.badRequest('labelIds must not repeat a label id');
    const labels = await this.#business(instance);
    const wanted: Label[] = [];
    for (const id of ids) wanted.push(await this.#known(instance, id));
    if (mode === 'set') {
      const keep = new Set(ids);
      for (const label of await listChatLabels(this.#store.db, instance.id, chat))
        if (!keep.has(label.id)) await labels.labelChat(chat, label, false);
    }
    for (const label of wanted) await labels.labelChat(chat, label, true);
    return { chat, labels: await listChatLabels(this.#store.db, instance.id, chat) };
  }

  /**
   * Takes label `id` off chat `rawChat` (idempotent: a label not on the chat is asked off all the same, in case the
   * platform has it where parley did not see it). Resolves with the chat's labels afterwards.
   * @throws DomainError invalid naming `jid` or `labelId`; not_found `label <id> not found`.
   */
  unlabelChat(instance: Instance, rawChat: string, id: string): Promise<ChatLabels> {
    return this.#serial(instance, () => this.#unlabelChat(instance, rawChat, id));
  }

  async #unlabelChat(instance: Instance, rawChat: string, id: string): Promise<ChatLabels> {
    const chat = await storedChatJid(this.#store.db, instance.id, rawChat);
    labelId(id, 'labelId');
    const labels = await this.#business(instance);
    await labels.labelChat(chat, await this.#known(instance, id), false);
    return { chat, labels: await listChatLabels(this.#store.db, instance.id, chat) };
  }

  /**
   * Runs `change` after the instance's earlier label changes have settled (whether they succeeded or not), and
   * resolves or rejects as it does.
   */
  #serial<T>(instance: Instance, change: () => Promise<T>): Promise<T> {
    const before = this.#queues.get(instance.id) ?? Promise.resolve();
    const run = before.then(change);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.#queues.set(instance.id, tail);
    void tail.then(() => {
      if (this.#queues.get(instance.id) === tail) this.#queues.delete(instance.id);
    });
    return run;
  }

  /** The session's labels, once the account is known to be a business account. */
  async #business(instance: Instance): Promise<LabelsCapability> {
    const labels = labelsOf(this.#sessions.ready(instance));
    if (!(await labels.isBusiness())) throw errors.conflict(NOT_BUSINESS);
    return labels;
  }

  /** Label `id` as parley knows it. @throws DomainError not_found `label <id> not found`. */
  async #known(instance: Instance, id: string): Promise<Label> {
    const label = await findLabel(this.#store.db, instance.id, id);
    if (!label) throw errors.notFound(`label ${id} not found`);
    return label;
  }
}

/**
 * The id after the highest of `labels` (ids compared as integers: BigInt, as they may have up to 20 digits, past
 * 2^53), "1" when there is none.
 * @throws DomainError conflict when that id would have more than 20 digits.
 */
export function nextLabelId(labels: readonly Label[]): string {
  let max = 0n;
  for (const l of labels) if (LABEL_ID.test(l.id) && BigInt(l.id) > max) max = BigInt(l.id);
  const next = String(max + 1n);
  if (!LABEL_ID.test(next)) throw errors.conflict('no label id is left after the highest (20 digits)');
  return next;
}

/** `raw` trimmed. @throws DomainError invalid naming `name` when blank or longer than {@link LABEL_NAME_MAX}. */
function labelName(raw: string): string {
  const name = raw.trim();
  if (name === '') throw errors.badRequest('name must not be blank');
  if ([...name].length > LABEL_NAME_MAX)
    throw errors.badRequest(`name must be at most ${LABEL_NAME_MAX} characters`);
  return name;
}

/** @throws DomainError invalid naming `color` unless an integer 0 to 19 (Baileys Types/Label.d.ts `LabelColor`). */
function labelColor(color: number): number {
  if (!Number.isInteger(color) || color < 0 || color >= LABEL_COLORS)
    throw errors.badRequest(`color must be an integer from 0 to ${LABEL_COLORS - 1}`);
  return color;
}

/**
 * @throws DomainError invalid naming `field` unless `id` is a label id (1 to 20 digits): `labelIds` for an item of
 *   that list, else the path parameter's name.
 */
function labelId(id: string, field: string): void {
  if (LABEL_ID.test(id)) return;
  throw errors.badRequest(
    field === 'labelIds'
      ? 'labelIds must hold label ids (1 to 20 digits, e.g. "1")'
      : `${field} must be a label id (1 to 20 digits, e.g. "1")`,
  );
}

/** @throws DomainError conflict when a label of `labels` is named `name`, ignoring case. */
function uniqueName(labels: readonly Label[], name: string): void {
  const same = labels.find((l) => l.name.toLowerCase() === name.toLowerCase());
  if (same) throw errors.conflict(`a label named "${same.name}" exists already (id ${same.id})`);
}

/** The session's labels. @throws DomainError platform_refused when its engine has none. */
function labelsOf(session: EngineSession): LabelsCapability {
  const { isBusiness, editLabel, labelChat, syncLabels } = session;
  if (!isBusiness || !editLabel || !labelChat) {
    throw new DomainError('platform_refused', 'this engine does not manage labels');
  }
  return {
    isBusiness: isBusiness.bind(session),
    editLabel: editLabel.bind(session),
    labelChat: labelChat.bind(session),
    ...(syncLabels ? { syncLabels: syncLabels.bind(session) } : {}),
  };
}
