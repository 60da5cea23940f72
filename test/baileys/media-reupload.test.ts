/**
 * Media re-upload ("media retry", docs/decisions/0046-media-re-upload.md): the simulator's independent crypto
 * (sim/media/retry.ts) against Baileys' own Utils/messages-media.js — Baileys' `encryptMediaRetryRequest` is
 * opened by the simulator, the simulator's answer is read by Baileys' `decodeMediaRetryNode` and
 * `decryptMediaRetryData` — and parley's request (src/engines/baileys/media-reupload.ts) over a fake socket: one
 * `server-error` receipt, the new direct path on SUCCESS, `gone` with the phone's reason otherwise, and a bounded
 * wait.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { describe, it } from 'node:test';
import {
  type BaileysEventMap,
  type BinaryNode,
  decodeMediaRetryNode,
  decryptMediaRetryData,
  encryptMediaRetryRequest,
  proto,
} from 'baileys';
import {
  decryptRetryNotification,
  decryptRetryRequest,
  encryptRetryNotification,
  encryptRetryRequest,
  MediaRetryError,
  RetryResult,
  retryCiphertextOf,
} from '../../sim/media/retry.ts';
import { DomainError } from '../../src/domain/errors.ts';
import type { EngineMessage } from '../../src/domain/messages.ts';
import {
  platformKeyOf,
  type ReuploadSocket,
  requestMediaReupload,
} from '../../src/engines/baileys/media-reupload.ts';

const ID = '3EB0C431C26A1916E07E';
const CHAT = '5511988887777@s.whatsapp.net';
const ME = '5511999990000:3@s.whatsapp.net';
const PATH = '/v/t62.7118-24/123_456_n.enc?ccb=11-4&oh=01_x&oe=6B1ADA61';

/** The `mediaretry` notification a phone sends for `answer`, as the simulator builds it. */
function notification(mediaKey: Buffer, result: number, directPath?: string): BinaryNode {
  const sealed = encryptRetryNotification(mediaKey, ID, { result, ...(directPath ? { directPath } : {}) });
  return {
    tag: 'notification',
    attrs: { id: ID, type: 'mediaretry', from: 's.whatsapp.net' },
    content: [
      {
        tag: 'encrypt',
        attrs: {},
        content: [
          { tag: 'enc_p', attrs: {}, content: sealed.ciphertext },
          { tag: 'enc_iv', attrs: {}, content: sealed.iv },
        ],
      },
      { tag: 'rmr', attrs: { jid: CHAT, from_me: 'false' } },
    ],
  };
}

describe('media retry crypto: the simulator against Baileys', () => {
  it("Baileys' request opens with the simulator's retry key and names the message", () => {
    const mediaKey = randomBytes(32);
    const node = encryptMediaRetryRequest({ id: ID, remoteJid: CHAT, fromMe: false }, mediaKey, ME);
    assert.equal(node.tag, 'receipt');
    assert.deepEqual(node.attrs, { id: ID, to: '5511999990000@s.whatsapp.net', type: 'server-error' });
    const data = retryCiphertextOf(node);
    assert.ok(data, 'an <encrypt> with enc_p and enc_iv');
    assert.equal(decryptRetryRequest(data, mediaKey, ID), ID);
    assert.throws(() => decryptRetryRequest(data, randomBytes(32), ID), MediaRetryError);
    assert.throws(() => decryptRetryRequest(data, mediaKey, 'OTHER'), MediaRetryError);
  });

  it("the simulator's answer is read by Baileys' decodeMediaRetryNode and decryptMediaRetryData", () => {
    const mediaKey = randomBytes(32);
    const event = decodeMediaRetryNode(notification(mediaKey, RetryResult.SUCCESS, PATH));
    assert.deepEqual(event.key, { id: ID, remoteJid: CHAT, fromMe: false, participant: undefined });
    assert.equal(event.error, undefined);
    assert.ok(event.media);
    const answer = decryptMediaRetryData(event.media, mediaKey, ID);
    assert.equal(answer.result, proto.MediaRetryNotification.ResultType.SUCCESS);
    assert.equal(answer.directPath, PATH);
    assert.equal(answer.stanzaId, ID);
    const notFound = decodeMediaRetryNode(notification(mediaKey, RetryResult.NOT_FOUND));
    assert.ok(notFound.media);
    const failed = decryptMediaRetryData(notFound.media, mediaKey, ID);
    assert.equal(failed.result, proto.MediaRetryNotification.ResultType.NOT_FOUND);
    assert.ok(!failed.directPath, 'no direct path without a success');
    assert.throws(() =>
      decryptMediaRetryData(
        notFound.media ?? { ciphertext: Buffer.alloc(0), iv: Buffer.alloc(0) },
        randomBytes(32),
        ID,
      ),
    );
  });

  it('each side reads its own output back (request and answer)', () => {
    const mediaKey = randomBytes(32);
    assert.equal(decryptRetryRequest(encryptRetryRequest(mediaKey, ID), mediaKey, ID), ID);
    const answer = decryptRetryNotification(
      encryptRetryNotification(mediaKey, ID, { result: RetryResult.SUCCESS, directPath: PATH }),
      mediaKey,
      ID,
    );
    assert.equal(answer.directPath, PATH);
  });
});

/** A socket whose `sendNode` records the request and lets the test answer it as the phone would. */
function fakeSocket(answer: (node: BinaryNode, emit: (n: BinaryNode) => void) => void) {
  const events = new EventEmitter();
  const sent: BinaryNode[] = [];
  const sock: ReuploadSocket = {
    user: { id: ME },
    ev: {
      on: <E extends keyof BaileysEventMap>(event: E, listener: (arg: BaileysEventMap[E]) => void) =>
        void events.on(event, listener),
      off: <E extends keyof BaileysEventMap>(event: E, listener: (arg: BaileysEventMap[E]) => void) =>
        void events.off(event, listener),
    },
    sendNode: async (node: BinaryNode) => {
      sent.push(node);
      // As Baileys' Socket/messages-recv.js does with a `mediaretry` notification.
      answer(node, (n) => events.emit('messages.media-update', [decodeMediaRetryNode(n)]));
    },
  };
  return { sock, sent, listeners: () => events.listenerCount('messages.media-update') };
}

const message: EngineMessage = {
  id: ID,
  source: { chat: CHAT, sender: CHAT, isFromMe: false, isGroup: false },
  pushName: 'Ana',
  timestamp: 1_760_000_000_000,
  content: { kind: 'image' },
};

describe("parley's re-upload request", () => {
  it('sends one server-error receipt and resolves with the direct path of a SUCCESS', async () => {
    const mediaKey = randomBytes(32);
    const { sock, sent, listeners } = fakeSocket((node, emit) => {
      const data = retryCiphertextOf(node);
      assert.ok(data);
      assert.equal(decryptRetryRequest(data, mediaKey, ID), ID);
      setImmediate(() => emit(notification(mediaKey, RetryResult.SUCCESS, PATH)));
    });
    assert.equal(await requestMediaReupload(sock, message, mediaKey, 2_000), PATH);
    assert.equal(sent.length, 1);
    assert.deepEqual(sent[0]?.attrs, { id: ID, to: '5511999990000@s.whatsapp.net', type: 'server-error' });
    assert.equal(listeners(), 0, 'the listener is removed');
  });

  it('a phone that no longer has the file: gone, naming NOT_FOUND', async () => {
    const mediaKey = randomBytes(32);
    const { sock, listeners } = fakeSocket((_node, emit) =>
      setImmediate(() => emit(notification(mediaKey, RetryResult.NOT_FOUND))),
    );
    await assert.rejects(requestMediaReupload(sock, message, mediaKey, 2_000), (error: unknown) => {
      assert.ok(error instanceof DomainError);
      assert.equal(error.code, 'gone');
      assert.equal(
        error.message,
        `the platform no longer has the media of message ${ID} (its media links expire after a while), parley had not kept a copy, and the sender's phone could not upload it again: it no longer has the file (NOT_FOUND)`,
      );
      return true;
    });
    assert.equal(listeners(), 0);
  });

  it('an <error> answer and an answer for another message', async () => {
    const mediaKey = randomBytes(32);
    const { sock } = fakeSocket((_node, emit) =>
      setImmediate(() => {
        emit({
          ...notification(mediaKey, RetryResult.SUCCESS, PATH),
          attrs: { id: 'OTHER', type: 'mediaretry' },
        });
        emit({
          tag: 'notification',
          attrs: { id: ID, type: 'mediaretry' },
          content: [
            { tag: 'rmr', attrs: { jid: CHAT, from_me: 'false' } },
            { tag: 'error', attrs: { code: '2' } },
          ],
        });
      }),
    );
    await assert.rejects(requestMediaReupload(sock, message, mediaKey, 2_000), {
      code: 'gone',
      message: /could not upload it again: Failed to re-upload media \(2\)$/,
    });
  });

  it('no answer in time: gone after the timeout, the listener removed', async () => {
    const { sock, listeners } = fakeSocket(() => undefined);
    const started = Date.now();
    await assert.rejects(requestMediaReupload(sock, message, randomBytes(32), 150), {
      code: 'gone',
      message: /could not upload it again: it did not answer within 0\.15 s$/,
    });
    assert.ok(Date.now() - started >= 140);
    assert.equal(listeners(), 0);
  });
});

describe('the platform key a re-upload request names', () => {
  const POSTER = '5511977776666@s.whatsapp.net';
  const GROUP = '120363025246125486@g.us';
  const keyOf = (source: EngineMessage['source']) => platformKeyOf({ ...message, source });
  /** The `<rmr>` of the request Baileys builds from the key. */
  const rmrOf = (source: EngineMessage['source']) => {
    const node = encryptMediaRetryRequest(keyOf(source), randomBytes(32), ME);
    const content = Array.isArray(node.content) ? node.content : [];
    return content.find((child) => child.tag === 'rmr')?.attrs;
  };

  it("a contact's status names its poster as participant", () => {
    const source = { chat: 'status@broadcast', sender: POSTER, isFromMe: false, isGroup: false };
    assert.deepEqual(keyOf(source), {
      id: ID,
      remoteJid: 'status@broadcast',
      fromMe: false,
      participant: POSTER,
    });
    assert.deepEqual(rmrOf(source), { jid: 'status@broadcast', from_me: 'false', participant: POSTER });
  });

  it('a group message names its sender; a 1:1 message and an own message name none', () => {
    assert.deepEqual(keyOf({ chat: GROUP, sender: POSTER, isFromMe: false, isGroup: true }), {
      id: ID,
      remoteJid: GROUP,
      fromMe: false,
      participant: POSTER,
    });
    assert.deepEqual(keyOf({ chat: CHAT, sender: CHAT, isFromMe: false, isGroup: false }), {
      id: ID,
      remoteJid: CHAT,
      fromMe: false,
    });
    assert.deepEqual(keyOf({ chat: 'status@broadcast', sender: ME, isFromMe: true, isGroup: false }), {
      id: ID,
      remoteJid: 'status@broadcast',
      fromMe: true,
    });
  });
});
