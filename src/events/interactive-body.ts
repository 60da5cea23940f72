import type { InteractiveReply } from '../domain/messages.ts';

/**
 * The `event.message` members of a reply to an interactive message (docs/decisions/0110-interactive-replies.md,
 * docs/api.md#webhook-events): each named and shaped as the platform's message (Baileys' WAProto `Message`), with
 * only the fields a receiver acts on. The text the user saw and sent is also `conversation`, and the interactive
 * message answered is `contextInfo.stanzaId`.
 */
export interface InteractiveReplyBody {
  /** A reply button picked: the button's id and title. */
  buttonsResponseMessage?: { selectedButtonId: string; selectedDisplayText: string };
  /** A list row picked: the row's title, id and description (when it has one). */
  listResponseMessage?: { title: string; singleSelectReply: { selectedRowId: string }; description?: string };
  /** A template's quick-reply button picked: its id, title and 0-based position (when the platform gave it). */
  templateButtonReplyMessage?: { selectedId: string; selectedDisplayText: string; selectedIndex?: number };
  /** A flow completed: its closing text, and the flow's name, answer (a JSON text) and version. */
  interactiveResponseMessage?: {
    body: { text: string };
    nativeFlowResponseMessage: { name: string; paramsJson: string; version: number };
  };
}

/** The {@link InteractiveReplyBody} member of `reply`, whose text the user saw and sent is `text`. */
export function interactiveReplyBody(reply: InteractiveReply, text: string): InteractiveReplyBody {
  switch (reply.type) {
    case 'buttons':
      return { buttonsResponseMessage: { selectedButtonId: reply.selectedId, selectedDisplayText: text } };
    case 'list':
      return {
        listResponseMessage: {
          title: text,
          singleSelectReply: { selectedRowId: reply.selectedId },
          ...(reply.description === undefined ? {} : { description: reply.description }),
        },
      };
    case 'template':
      return {
        templateButtonReplyMessage: {
          selectedId: reply.selectedId,
          selectedDisplayText: text,
          ...(reply.selectedIndex === undefined ? {} : { selectedIndex: reply.selectedIndex }),
        },
      };
    case 'flow':
      return {
        interactiveResponseMessage: {
          body: { text },
          nativeFlowResponseMessage: {
            name: reply.flow?.name ?? '',
            paramsJson: reply.flow?.paramsJson ?? '',
            version: reply.flow?.version ?? 0,
          },
        },
      };
  }
}
