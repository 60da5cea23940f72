import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { WACallEvent } from 'baileys';
import type { CallSettings } from '../../src/domain/calls.ts';
import type { EngineEvent, OutgoingMessage } from '../../src/domain/messages.ts';
import { CallHandler, callStatusOf } from '../../src/engines/baileys/calls.ts';
import { JidResolver } from '../../src/engines/baileys/jid.ts';
import type { SocketLike } from '../../src/engines/baileys/socket.ts';
import { noEmitWith, silentLogger } from './support.ts';

const CALLER = '5511988887777@s.whatsapp.net';
const AT = new Date('2026-01-15T12:00:00.000Z');

/** A handler over recorded events, sends and rejects, with the given call settings. */
function harness(settings: CallSettings) {
  const events: EngineEvent[] = [];
  const sends: OutgoingMessage[] = [];
  const rejects: [string, string][] = [];
  const sock = {
    rejectCall: async (id: string, from: string) => {
      rejects.push([id, from]);
    },
  } as unknown as SocketLike;
  const handler = new CallHandler({
    context: {
      instanceId: 'i',
      env: 'live',
      auth: {} as never,
      emit: async (event) => {
        events.push(event);
      },
      emitWith: noEmitWith,
      findMessage: async () => undefined,
      callSettings: async () => settings,
      logger: silentLogger(),
      clock: () => AT.getTime() + 5000,
    },
    resolver: new JidResolver({ lookup: () => undefined }),
    record: async (event) => {
      events.push(event);
      return true;
    },
    send: async (_sock, message) => {
      sends.push(message);
      return { id: '3EB0', timestamp: 0 };
    },
  });
  const call = (
    id: string,
    status: WACallEvent['status'],
    extra: Partial<WACallEvent> = {},
  ): WACallEvent => ({
    chatId: CALLER,
    from: CALLER,
    id,
    date: AT,
    status,
    offline: false,
    ...extra,
  });
  const statuses = () =>
    events.map((e) => (e.type === 'call' ? [e.call.id, e.call.status, e.call.autoRejected === true] : []));
  return { handler, sock, events, sends, rejects, call, statuses };
}

describe('live engine: calls (Baileys call events → Call events, automatic reject)', () => {
  it('maps Baileys statuses: offer, missed (timeout, terminate), rejected, accepted; transport steps are not reported', () => {
    assert.equal(callStatusOf('offer'), 'offer');
    assert.equal(callStatusOf('timeout'), 'missed');
    assert.equal(callStatusOf('terminate'), 'missed');
    assert.equal(callStatusOf('reject'), 'rejected');
    assert.equal(callStatusOf('accept'), 'accepted');
    for (const status of ['ringing', 'preaccept', 'transport', 'relaylatency'] as const) {
      assert.equal(callStatusOf(status), null, status);
    }
  });

  it('reports offer then missed with the caller, video and the platform time; the hang-up after an answer is not missed', async () => {
    const h = harness({ reject: false, message: null });
    await h.handler.handle(h.sock, [
      h.call('A', 'offer', { isVideo: true }),
      h.call('A', 'ringing'),
      h.call('A', 'terminate'),
    ]);
    await h.handler.handle(h.sock, [h.call('B', 'offer'), h.call('B', 'accept'), h.call('B', 'terminate')]);
    assert.deepEqual(h.statuses(), [
      ['A', 'offer', false],
      ['A', 'missed', false],
      ['B', 'offer', false],
      ['B', 'accepted', false],
    ]);
    const [first] = h.events;
    assert.deepEqual(first, {
      type: 'call',
      call: {
        id: 'A',
        from: CALLER,
        status: 'offer',
        isVideo: true,
        isGroup: false,
        timestamp: AT.getTime(),
      },
      platformId: 'call/A/offer',
    });
    assert.deepEqual(h.rejects, []);
  });

  it('with the automatic reject: rejects the offer, reports rejected, sends the message; its terminate is not missed', async () => {
    const h = harness({ reject: true, message: 'Busy' });
    await h.handler.handle(h.sock, [h.call('C', 'offer'), h.call('C', 'terminate')]);
    assert.deepEqual(h.rejects, [['C', CALLER]]);
    assert.deepEqual(h.statuses(), [
      ['C', 'offer', false],
      ['C', 'rejected', true],
    ]);
    assert.deepEqual(h.sends, [{ to: CALLER, content: { kind: 'text', text: 'Busy', linkPreview: false } }]);
  });

  it('a call ends once: no end or offer after its end; each event carries its step as platformId', async () => {
    const h = harness({ reject: false, message: null });
    await h.handler.handle(h.sock, [
      h.call('J', 'offer'),
      h.call('J', 'accept'),
      h.call('J', 'reject'),
      h.call('J', 'offer', { offline: true }),
      h.call('J', 'terminate'),
    ]);
    assert.deepEqual(
      h.events.map((e) => (e.type === 'call' ? [e.call.status, e.platformId] : [])),
      [
        ['offer', 'call/J/offer'],
        ['accepted', 'call/J/end'],
      ],
    );
  });

  it('does not reject group calls or offers delivered while offline', async () => {
    const h = harness({ reject: true, message: 'Busy' });
    await h.handler.handle(h.sock, [
      h.call('D', 'offer', { isGroup: true }),
      h.call('E', 'offer', { offline: true }),
    ]);
    assert.deepEqual(h.rejects, []);
    assert.deepEqual(h.sends, []);
    assert.deepEqual(h.statuses(), [
      ['D', 'offer', false],
      ['E', 'offer', false],
    ]);
  });

  it('rejects a ringing call on request with the caller Baileys named; then 409; unknown ids 404', async () => {
    const h = harness({ reject: false, message: null });
    await h.handler.handle(h.sock, [h.call('F', 'offer', { isVideo: true })]);
    const rejected = await h.handler.reject(h.sock, 'F');
    assert.deepEqual(h.rejects, [['F', CALLER]]);
    assert.deepEqual(rejected, {
      id: 'F',
      from: CALLER,
      status: 'rejected',
      isVideo: true,
      isGroup: false,
      timestamp: AT.getTime() + 5000,
    });
    assert.deepEqual(h.statuses(), [
      ['F', 'offer', false],
      ['F', 'rejected', false],
    ]);
    await assert.rejects(h.handler.reject(h.sock, 'F'), {
      code: 'conflict',
      message: 'call F is no longer ringing (rejected)',
    });
    await h.handler.handle(h.sock, [h.call('G', 'offer'), h.call('G', 'terminate')]);
    await assert.rejects(h.handler.reject(h.sock, 'G'), {
      code: 'conflict',
      message: 'call G is no longer ringing (missed)',
    });
    await assert.rejects(h.handler.reject(h.sock, 'H'), { code: 'not_found', message: 'call H not found' });
    assert.deepEqual(h.rejects, [['F', CALLER]], 'nothing else was sent');
  });
});
