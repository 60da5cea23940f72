/**
 * The live engine's business labels over a Baileys socket (src/engines/baileys/labels.ts,
 * docs/decisions/0045-business-labels.md): each change as the `chatModify` modification Baileys turns into an app
 * state patch, checked against Baileys' own `chatModificationToAppPatch` (Utils/chat-utils.js: `label_edit` and
 * `label_jid` mutations of the `regular` collection); the patch read back by Baileys' `processSyncAction` gives the
 * `labels.edit` / `labels.association` events parley turns into `label` / `chat-label` events; the business check
 * asks once per socket and reads a 404 as a personal account.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import {
  type BaileysEventEmitter,
  type BaileysEventMap,
  type ChatModification,
  chatModificationToAppPatch,
  processSyncAction,
} from 'baileys';
import { DomainError } from '../../src/domain/errors.ts';
import { JidResolver } from '../../src/engines/baileys/jid.ts';
import {
  BusinessCheck,
  chatLabelEventOf,
  chatLabelModification,
  editLabel,
  labelChat,
  labelEditModification,
  labelEventOf,
  storedLabelName,
} from '../../src/engines/baileys/labels.ts';
import type { SocketLike } from '../../src/engines/baileys/socket.ts';

const ANA = '5511988887777@s.whatsapp.net';
const OWN = '5511999990045@s.whatsapp.net';

/** Baileys' own reading of a patch (Utils/chat-utils.js processSyncAction): the events it emits. */
function processed(mod: ChatModification, jid: string): { event: string; arg: unknown }[] {
  const patch = chatModificationToAppPatch(mod, jid);
  const emitted: { event: string; arg: unknown }[] = [];
  const ev = new EventEmitter();
  const fake = {
    emit: (event: string, arg: unknown) => {
      emitted.push({ event, arg });
      return ev.emit(event, arg);
    },
  } as unknown as BaileysEventEmitter;
  processSyncAction({ syncAction: { value: patch.syncAction }, index: patch.index }, fake, { id: OWN });
  return emitted;
}

describe('live engine: labels as chatModify', () => {
  it('a label edit as addLabel: Baileys makes a label_edit mutation of the regular collection', () => {
    const edit = { id: '3', name: 'Paid', color: 4, predefinedId: null, deleted: false };
    const mod = labelEditModification(edit);
    assert.deepEqual(mod, { addLabel: { id: '3', name: 'Paid', color: 4, deleted: false } });
    const patch = chatModificationToAppPatch(mod, OWN);
    assert.deepEqual(patch.index, ['label_edit', '3']);
    assert.equal(patch.type, 'regular');
    assert.deepEqual(patch.syncAction.labelEditAction, {
      name: 'Paid',
      color: 4,
      predefinedId: undefined,
      deleted: false,
    });
    const predefined = labelEditModification({ ...edit, predefinedId: '2', deleted: true });
    assert.deepEqual(chatModificationToAppPatch(predefined, OWN).syncAction.labelEditAction, {
      name: 'Paid',
      color: 4,
      predefinedId: 2,
      deleted: true,
    });
  });

  it('a chat label as addChatLabel / removeChatLabel: label_jid mutations indexed [label_jid, label, chat]', () => {
    assert.deepEqual(chatLabelModification('3', true), { addChatLabel: { labelId: '3' } });
    assert.deepEqual(chatLabelModification('3', false), { removeChatLabel: { labelId: '3' } });
    const on = chatModificationToAppPatch(chatLabelModification('3', true), ANA);
    const off = chatModificationToAppPatch(chatLabelModification('3', false), ANA);
    assert.deepEqual(on.index, ['label_jid', '3', ANA]);
    assert.equal(on.type, 'regular');
    assert.deepEqual(on.syncAction.labelAssociationAction, { labeled: true });
    assert.deepEqual(off.syncAction.labelAssociationAction, { labeled: false });
  });

  it('what Baileys emits when it reads those patches back becomes label and chat-label events', async () => {
    const resolver = new JidResolver();
    const [edit] = processed(
      labelEditModification({ id: '3', name: 'Paid', color: 4, predefinedId: null, deleted: false }),
      OWN,
    );
    assert.equal(edit?.event, 'labels.edit');
    assert.deepEqual(labelEventOf(edit?.arg as BaileysEventMap['labels.edit']), {
      type: 'label',
      label: { id: '3', name: 'Paid', color: 4, predefinedId: null, deleted: false },
    });
    for (const labeled of [true, false]) {
      const [association] = processed(chatLabelModification('3', labeled), ANA);
      assert.equal(association?.event, 'labels.association');
      assert.deepEqual(
        await chatLabelEventOf(association?.arg as BaileysEventMap['labels.association'], resolver),
        { type: 'chat-label', change: { chat: ANA, labelId: '3', labeled } },
      );
    }
    // A chat named by LID becomes the phone JID the resolver knows; a message label is not modelled.
    resolver.remember('123456789@lid', ANA, false);
    assert.deepEqual(
      await chatLabelEventOf(
        { type: 'add', association: { type: 'label_jid', chatId: '123456789@lid', labelId: '5' } } as never,
        resolver,
      ),
      { type: 'chat-label', change: { chat: ANA, labelId: '5', labeled: true } },
    );
    assert.equal(
      await chatLabelEventOf(
        {
          type: 'add',
          association: { type: 'label_message', chatId: ANA, messageId: 'M1', labelId: '5' },
        } as never,
        resolver,
      ),
      null,
    );
  });

  it('synced values the store cannot hold: odd label ids dropped, long names cut, NULs removed', async () => {
    const edit = (label: Record<string, unknown>) =>
      labelEventOf(label as unknown as BaileysEventMap['labels.edit']);
    for (const id of ['', 'abc', '1.5', '-1', '123456789012345678901', ' 7'])
      assert.equal(edit({ id, name: 'X' }), null, id);
    const long = `${'é'.repeat(150)}${'😀'.repeat(100)}`;
    assert.deepEqual(edit({ id: '12345678901234567890', name: long, color: 99, predefinedId: 'x' }), {
      type: 'label',
      label: {
        id: '12345678901234567890',
        name: `${'é'.repeat(150)}${'😀'.repeat(50)}`,
        color: 0,
        predefinedId: null,
        deleted: false,
      },
    });
    assert.equal(storedLabelName('a\u0000b'), 'ab');
    assert.equal([...storedLabelName('x'.repeat(500))].length, 200);
    const resolver = new JidResolver();
    const association = (chatId: string, labelId: string) =>
      chatLabelEventOf(
        { type: 'add', association: { type: 'label_jid', chatId, labelId } } as never,
        resolver,
      );
    assert.equal(await association(ANA, 'x'), null);
    assert.equal(await association(`${'1'.repeat(160)}@g.us`, '1'), null);
    assert.deepEqual(await association(ANA, '12345678901234567890'), {
      type: 'chat-label',
      change: { chat: ANA, labelId: '12345678901234567890', labeled: true },
    });
  });

  it('editLabel and labelChat call chatModify; the business check asks once per socket, 404 is personal', async () => {
    const calls: { mod: ChatModification; jid: string }[] = [];
    const asked: string[] = [];
    let answer: unknown = { description: 'Open 9 to 18', website: [] };
    const socket = () =>
      ({
        chatModify: async (mod: ChatModification, jid: string) => {
          calls.push({ mod, jid });
        },
        getBusinessProfile: async (jid: string) => {
          asked.push(jid);
          if (answer instanceof Error) throw answer;
          return answer;
        },
      }) as unknown as SocketLike;
    const sock = socket();
    await editLabel(sock, OWN, { id: '1', name: 'VIP', color: 0, predefinedId: null, deleted: false });
    await labelChat(sock, ANA, '1', true);
    assert.deepEqual(calls, [
      { mod: { addLabel: { id: '1', name: 'VIP', color: 0, deleted: false } }, jid: OWN },
      { mod: { addChatLabel: { labelId: '1' } }, jid: ANA },
    ]);
    const check = new BusinessCheck();
    assert.equal(await check.ask(sock, '5511999990045', 0), true);
    assert.equal(await check.ask(sock, '5511999990045', 0), true);
    assert.deepEqual(asked, [OWN]);
    answer = undefined;
    assert.equal(await check.ask(socket(), '5511999990045', 0), false, 'a new socket asks again');
    answer = Object.assign(new Error('item-not-found'), {
      isBoom: true,
      output: { statusCode: 404 },
      data: 404,
    });
    assert.equal(await new BusinessCheck().ask(socket(), '5511999990045', 0), false);
    answer = Object.assign(new Error('internal-server-error'), {
      isBoom: true,
      output: { statusCode: 500 },
      data: 500,
    });
    await assert.rejects(new BusinessCheck().ask(socket(), '5511999990045', 0), (error: unknown) => {
      assert.ok(error instanceof DomainError);
      assert.equal(error.code, 'platform_refused');
      return true;
    });
  });
});
