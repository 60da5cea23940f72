/**
 * An account's business labels on the simulated platform (docs/simulator.md, Business labels;
 * docs/decisions/0045-business-labels.md): the labels and the labels on each chat, as the account's devices set them
 * with app state mutations of the `regular` collection (Baileys 7 Utils/chat-utils.js `chatModificationToAppPatch`):
 * `[label_edit, <id>]` carries a `labelEditAction` (`name`, `color`, `predefinedId`, `deleted`), and
 * `[label_jid, <label id>, <chat jid>]` a `labelAssociationAction` (`labeled`). The simulated phone makes the same
 * mutations (control/labels.ts). Kept on the user (model/accounts.ts), so the state file keeps them.
 */
import type { proto } from 'baileys';
import type { User } from './accounts.ts';

/** One label of an account: `color` 0 to 19, `predefinedId` the platform's predefined label number or null. */
export interface SimLabel {
  id: string;
  name: string;
  color: number;
  predefinedId: number | null;
}

/** Orders label ids numerically (ids are decimal digits). */
export function byLabelId(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/**
 * Applies one decrypted `label_edit` or `label_jid` mutation to `user`'s labels; true when it was one (anything else
 * is left to the caller). A deleted label is dropped with its chat labels; a chat's label list stays in id order.
 */
export function applyLabelMutation(
  user: User,
  index: readonly string[],
  value: proto.ISyncActionValue,
): boolean {
  const [kind, id, chat] = index;
  if (kind === 'label_edit' && id && value.labelEditAction) {
    const edit = value.labelEditAction;
    const labels = { ...user.labels };
    if (edit.deleted) {
      delete labels[id];
      const chats: Record<string, string[]> = {};
      for (const [jid, ids] of Object.entries(user.chatLabels ?? {})) {
        const rest = ids.filter((l) => l !== id);
        if (rest.length > 0) chats[jid] = rest;
      }
      user.chatLabels = chats;
    } else {
      labels[id] = {
        id,
        name: edit.name ?? '',
        color: edit.color ?? 0,
        predefinedId: edit.predefinedId ?? null,
      };
    }
    user.labels = labels;
    return true;
  }
  if (kind === 'label_jid' && id && chat && value.labelAssociationAction) {
    const ids = new Set(user.chatLabels?.[chat] ?? []);
    if (value.labelAssociationAction.labeled) ids.add(id);
    else ids.delete(id);
    const chats = { ...user.chatLabels };
    if (ids.size > 0) chats[chat] = [...ids].sort(byLabelId);
    else delete chats[chat];
    user.chatLabels = chats;
    return true;
  }
  return false;
}

/** `user`'s labels in id order, and its chat labels by chat JID. */
export function labelsView(user: User): { labels: SimLabel[]; chats: Record<string, string[]> } {
  const labels = Object.values(user.labels ?? {}).sort((a, b) => byLabelId(a.id, b.id));
  return { labels, chats: user.chatLabels ?? {} };
}
