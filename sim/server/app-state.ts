/**
 * The account's app state on the simulated platform (docs/simulator.md, Business labels;
 * docs/decisions/0043-chat-actions-and-star.md, docs/decisions/0045-business-labels.md), as Baileys 7 syncs it
 * (Socket/chats.js `appPatch` and `resyncAppState`, Utils/chat-utils.js):
 * - A `w:sync:app:state` set whose `<collection>` carries a `<patch>` is a device's change: its mutations are
 *   decrypted with the account's app state key (shared by the phone, messaging/history.ts) and applied
 *   ({@link applyMutation}); the patch is kept, with its version (the collection's `version` + 1), and answered with
 *   the collection at that version. A patch made on an older version than the platform's is refused 409, as the
 *   platform refuses a device that did not resync first; one the key cannot decrypt is refused 400.
 * - A `<collection>` without a patch is a resync from `version`: the answer carries every kept patch after it
 *   (`<patches><patch>…`), which Baileys decodes and turns into events (`labels.edit`, `labels.association`,
 *   `chats.update`, …).
 * - The simulated phone changes the app state itself with {@link phoneMutation} (control/labels.ts): the mutation is
 *   encrypted and MAC'd with the same key over the collection's LT hash (Baileys `encodeSyncdPatch`), kept as the
 *   collection's next patch, applied, and announced to every linked companion with a `<notification
 *   type="server_sync">` naming the collection, on which Baileys resyncs it.
 */
import {
  type BinaryNode,
  decodeSyncdMutations,
  encodeSyncdPatch,
  getBinaryNodeChild,
  getBinaryNodeChildren,
  newLTHashState,
  proto,
  type WAPatchCreate,
} from 'baileys';
import { deliver } from '../messaging/delivery.ts';
import { newMessageId } from '../messaging/send.ts';
import { ModelError, SERVER_JID, type SimCollection, type User } from '../model/accounts.ts';
import { applyLabelMutation } from '../model/labels.ts';
import { applyChatMutation } from './account-iq.ts';
import type { IqAnswer } from './iq.ts';

const badRequest = (text: string): IqAnswer => ({ error: { code: 400, text } });

/** The account's collection `name`, created empty (version 0) on first use. */
function collectionOf(user: User, name: string): SimCollection {
  const existing = user.appState?.[name];
  if (existing) return existing;
  const created: SimCollection = { version: 0, state: newLTHashState(), patches: [] };
  user.appState = { ...user.appState, [name]: created };
  return created;
}

/** Baileys' key lookup for the account's app state key (`FetchAppStateSyncKey`). */
function keyLookup(key: { id: Buffer; data: Buffer }) {
  return async (id: string) =>
    id === key.id.toString('base64')
      ? proto.Message.AppStateSyncKeyData.fromObject({ keyData: key.data })
      : null;
}

/**
 * Applies one decrypted mutation to `user`, by its index: `setting_pushName` changes the push name, `label_edit`
 * and `label_jid` the labels (model/labels.ts), `archive`, `pin_v1`, `mute`, `markChatAsRead` and `star` the chat
 * state (account-iq.ts `applyChatMutation`). Anything else is ignored.
 */
export function applyMutation(user: User, index: readonly string[], value: proto.ISyncActionValue): void {
  const name = value.pushNameSetting?.name;
  if (index[0] === 'setting_pushName') {
    if (name) user.pushName = name;
  } else if (!applyLabelMutation(user, index, value)) {
    applyChatMutation(user, index, value);
  }
}

/**
 * Answers a `w:sync:app:state` set: applies and keeps the patches devices send, and serves the kept patches to a
 * resync (see the module comment). Resolves with the answer (the collections at their versions).
 */
export async function appStatePatchIq(iq: BinaryNode, user: User): Promise<IqAnswer> {
  const collections = getBinaryNodeChildren(getBinaryNodeChild(iq, 'sync'), 'collection');
  const key = user.appStateKey;
  const answered: BinaryNode[] = [];
  for (const node of collections) {
    const name = node.attrs.name ?? '';
    const version = Number(node.attrs.version ?? '0');
    const patchNode = getBinaryNodeChild(node, 'patch');
    if (!(patchNode?.content instanceof Uint8Array)) {
      answered.push(resyncAnswer(user, name, version));
      continue;
    }
    if (!key) return badRequest('no app state key');
    const collection = collectionOf(user, name);
    if (version < collection.version) return { error: { code: 409, text: 'conflict' } };
    const patch = proto.SyncdPatch.decode(patchNode.content);
    let state: Awaited<ReturnType<typeof decodeSyncdMutations>>;
    try {
      state = await decodeSyncdMutations(
        patch.mutations ?? [],
        collection.state,
        keyLookup(key),
        ({ syncAction, index }) => applyMutation(user, index, syncAction.value ?? {}),
        false,
      );
    } catch {
      return badRequest('patch cannot be decrypted');
    }
    const next = version + 1;
    patch.version = { version: next };
    collection.version = next;
    collection.state = { version: next, hash: Buffer.from(state.hash), indexValueMap: state.indexValueMap };
    collection.patches.push({ version: next, patch: Buffer.from(proto.SyncdPatch.encode(patch).finish()) });
    answered.push({ tag: 'collection', attrs: { name, version: String(next) } });
  }
  return { content: [{ tag: 'sync', attrs: {}, content: answered }] };
}

/** A resync's answer for collection `name` from `version`: the kept patches after it, if any. */
function resyncAnswer(user: User, name: string, version: number): BinaryNode {
  const collection = user.appState?.[name];
  const after = collection?.patches.filter((p) => p.version > version) ?? [];
  const attrs = { name, version: String(Math.max(collection?.version ?? 0, version)) };
  if (after.length === 0) return { tag: 'collection', attrs };
  return {
    tag: 'collection',
    attrs,
    content: [
      {
        tag: 'patches',
        attrs: {},
        content: after.map((p) => ({ tag: 'patch', attrs: {}, content: p.patch })),
      },
    ],
  };
}

/**
 * The simulated phone changes the account's app state: `create` (a Baileys `WAPatchCreate`, as
 * `chatModificationToAppPatch` makes it) becomes the collection's next patch, encrypted and MAC'd with the account's
 * app state key, is applied to the account, and every linked companion is sent a `server_sync` notification (or
 * gets it at its next login). Resolves with the collection's new version and how many devices were notified.
 * @throws ModelError 409 when the phone has not shared an app state key yet (no companion was ever linked).
 */
export async function phoneMutation(
  user: User,
  create: WAPatchCreate,
): Promise<{ version: number; devices: number }> {
  const key = user.appStateKey;
  if (!key) {
    throw new ModelError(
      409,
      `user ${user.phone} has no app state key yet: its phone shares one when a companion device links`,
    );
  }
  const collection = collectionOf(user, create.type);
  const { patch, state } = await encodeSyncdPatch(
    create,
    key.id.toString('base64'),
    collection.state,
    keyLookup(key),
  );
  const encoded = proto.SyncdPatch.encode({ ...patch, version: { version: state.version } }).finish();
  collection.version = state.version;
  collection.state = state;
  collection.patches.push({ version: state.version, patch: Buffer.from(encoded) });
  applyMutation(user, create.index, create.syncAction);
  let devices = 0;
  for (const device of user.devices.values()) {
    if (device.id === 0 || !device.linked) continue;
    deliver(device, {
      tag: 'notification',
      attrs: {
        id: newMessageId(),
        from: SERVER_JID,
        type: 'server_sync',
        t: String(Math.floor(Date.now() / 1000)),
      },
      content: [{ tag: 'collection', attrs: { name: create.type, version: String(state.version) } }],
    });
    devices++;
  }
  return { version: state.version, devices };
}
