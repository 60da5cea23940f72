import type { proto } from 'baileys';
import type { InteractiveReply } from '../../domain/messages.ts';

/**
 * A user's answer to a business's interactive message, read from the platform message that carries it
 * (docs/decisions/0110-interactive-replies.md; field names from Baileys' WAProto/WAProto.proto, `Message`):
 * - `buttonsResponseMessage` (a reply button picked): `selectedButtonId`, `selectedDisplayText`;
 * - `listResponseMessage` (a list row picked): `singleSelectReply.selectedRowId`, `title` (the row's title),
 *   `description` (the row's);
 * - `templateButtonReplyMessage` (a template's quick-reply button): `selectedId`, `selectedDisplayText`,
 *   `selectedIndex`;
 * - `interactiveResponseMessage` with a `nativeFlowResponseMessage` (a flow completed, or a native-flow button):
 *   `nativeFlowResponseMessage.name`, `.paramsJson`, `.version`, and `body.text`.
 * Each also has the `contextInfo` whose `stanzaId` names the interactive message answered.
 */
export interface FoundInteractiveReply {
  /** What was picked (the domain's {@link InteractiveReply}). */
  reply: InteractiveReply;
  /** The text the user saw and sent: the button's or row's title, the flow's closing text; '' when none. */
  text: string;
  /** The platform's context of the answer (the quoted interactive message, mentions, forwarding). */
  contextInfo: proto.IContextInfo | null | undefined;
}

/**
 * The interactive reply `content` (a message already unwrapped by Baileys' `normalizeMessageContent`) carries, or
 * undefined when it carries none of the four answers. An `interactiveResponseMessage` without a
 * `nativeFlowResponseMessage` (a kind of answer this version of the platform's schema does not name) is none.
 * Absent fields are '' (ids, texts, a flow's name and parameters) or 0 (a flow's version); `description` and
 * `selectedIndex` are left out when absent.
 */
export function interactiveReplyOf(content: proto.IMessage): FoundInteractiveReply | undefined {
  const buttons = content.buttonsResponseMessage;
  if (buttons) {
    return {
      reply: { type: 'buttons', selectedId: buttons.selectedButtonId ?? '' },
      text: buttons.selectedDisplayText ?? '',
      contextInfo: buttons.contextInfo,
    };
  }
  const list = content.listResponseMessage;
  if (list) {
    const reply: InteractiveReply = { type: 'list', selectedId: list.singleSelectReply?.selectedRowId ?? '' };
    if (list.description) reply.description = list.description;
    return { reply, text: list.title ?? '', contextInfo: list.contextInfo };
  }
  const template = content.templateButtonReplyMessage;
  if (template) {
    const reply: InteractiveReply = { type: 'template', selectedId: template.selectedId ?? '' };
    if (typeof template.selectedIndex === 'number') reply.selectedIndex = template.selectedIndex;
    return { reply, text: template.selectedDisplayText ?? '', contextInfo: template.contextInfo };
  }
  const interactive = content.interactiveResponseMessage;
  const flow = interactive?.nativeFlowResponseMessage;
  if (interactive && flow) {
    return {
      reply: {
        type: 'flow',
        selectedId: '',
        flow: { name: flow.name ?? '', paramsJson: flow.paramsJson ?? '', version: flow.version ?? 0 },
      },
      text: interactive.body?.text ?? '',
      contextInfo: interactive.contextInfo,
    };
  }
  return undefined;
}
