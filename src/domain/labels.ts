import type { Jid } from './messages.ts';

/**
 * Business labels (docs/decisions/0045-business-labels.md): a WhatsApp Business account names labels and puts them on
 * its chats. On the platform both are app state of the `regular` collection (Baileys 7 Utils/chat-utils.js
 * `chatModificationToAppPatch`: `label_edit` and `label_jid` mutations), synced to every device of the account.
 */

/** How many label colours the platform has: colour ids 0 to 19 (Baileys Types/Label.d.ts `LabelColor`). */
export const LABEL_COLORS = 20;

/** Longest label name parley accepts, in characters. */
export const LABEL_NAME_MAX = 100;

/**
 * One label of the account: `id` is the platform's label id (decimal digits as the account's devices number them),
 * `color` a colour id 0 to 19, `predefinedId` the number of one of the platform's predefined labels ("New customer",
 * …) as a string, or null for a label the account made.
 */
export interface Label {
  id: string;
  name: string;
  color: number;
  predefinedId: string | null;
}

/** A label change as the platform's `label_edit` mutation carries it: the label, or its deletion. */
export interface LabelEdit extends Label {
  deleted: boolean;
}

/** A chat labelled (`labeled` true) or unlabelled with label `labelId` (the platform's `label_jid` mutation). */
export interface ChatLabelChange {
  chat: Jid;
  labelId: string;
  labeled: boolean;
}

/** Label ids as parley accepts them in paths and bodies: 1 to 20 decimal digits. */
export const LABEL_ID = /^[0-9]{1,20}$/;

/**
 * Longest label name parley stores, in characters (code points): the `labels.name` column is varchar(200)
 * (src/store/migrations/0020_labels.ts). A longer name synced from the account's other devices is cut to this.
 */
export const LABEL_NAME_STORED_MAX = 200;

/** Longest chat JID parley stores with a label, in characters: the `chat_labels.chat` column is varchar(160). */
export const LABEL_CHAT_MAX = 160;
