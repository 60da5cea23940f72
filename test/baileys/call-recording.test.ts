/**
 * The live engine's call handler remembers a call's status only as reported once its event is recorded
 * (docs/decisions/0024-engines-and-data-flow.md): a status whose `call` event the store refused is recorded when
 * the platform reports it again (a `terminate` after a `timeout`, both `missed`), and a reject on request whose event
 * was refused fails with the recording's error, the reject made again recording the event without declining the
 * call on the platform a second time. Remembered before its event, the status was taken as reported: the platform's
 * next report of it was dropped, and the reject answered as done with no event, then 409 for ever.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { WACallEvent } from 'baileys';
import type { EngineCall } from '../../src/domain/calls.ts';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { CallHandler } from '../../src/engines/baileys/calls.ts';
import { JidResolver } from '../../src/engines/baileys/jid.ts';
import type { SocketLike } from '../../src/engines/baileys/socket.ts';
import { noEmitWith, silentLogger } from './support.ts';

const CALLER = '5511988887777@s.whatsapp.net';
const AT = new Date('2026-01-15T12:00:00.000Z');

/** A store error the recording cannot get past (a constraint violation). */
class Refused extends Error {}

/**
 * A handler whose recordings fail while `refusing` is set (both the queue's `record`, which reports the failure,
 * and the session's `emit`, which raises it).
 */
function harness() {
  const events: EngineEvent[] = [];
  const rejects: string[] = [];
  const state = { refusing: false };
  const sock = {
    rejectCall: async (id: string) => {
      rejects.push(id);
    },
  } as unknown as SocketLike;
  const emit = async (event: EngineEvent) => {
    if (state.refusing) throw new Refused('refused');
    events.push(event);
  };
  const handler = new CallHandler({
    context: {
      instanceId: 'i',
      env: 'live',
      auth: {} as never,
      emit,
      emitWith: noEmitWith,
      findMessage: async () => undefined,
      callSettings: async () => ({ reject: false, message: null }),
      logger: silentLogger(),
      clock: () => AT.getTime() + 5000,
    },
    resolver: new JidResolver({ lookup: () => undefined }),
    record: async (event) => {
      try {
        await emit(event);
        return true;
      } catch {
        return false;
      }
    },
    send: async () => ({ id: '3EB0', timestamp: 0 }),
  });
  const call = (id: string, status: WACallEvent['status']): WACallEvent => ({
    chatId: CALLER,
    from: CALLER,
    id,
    date: AT,
    status,
    offline: false,
  });
  const statuses = () => events.map((e) => (e.type === 'call' ? [e.call.id, e.call.status] : []));
  return { handler, sock, state, events, rejects, call, statuses };
}

describe('live engine: a call status is taken as reported only once its event is recorded', () => {
  it('a missed call whose event the store refused is recorded at the next report of the same end', async () => {
    const h = harness();
    await h.handler.handle(h.sock, [h.call('A', 'offer')]);
    h.state.refusing = true;
    await h.handler.handle(h.sock, [h.call('A', 'timeout')]);
    h.state.refusing = false;
    await h.handler.handle(h.sock, [h.call('A', 'terminate')]);
    assert.deepEqual(h.statuses(), [
      ['A', 'offer'],
      ['A', 'missed'],
    ]);
    await h.handler.handle(h.sock, [h.call('A', 'terminate')]);
    assert.equal(h.events.length, 2, 'a missed call recorded is reported once');
  });

  it('an offer whose event the store refused is recorded when the platform reports it again', async () => {
    const h = harness();
    h.state.refusing = true;
    await h.handler.handle(h.sock, [h.call('B', 'offer')]);
    h.state.refusing = false;
    await h.handler.handle(h.sock, [h.call('B', 'offer'), h.call('B', 'offer')]);
    assert.deepEqual(h.statuses(), [['B', 'offer']]);
  });

  it('a reject whose event the store refused fails with its error; the reject made again records it, declining once', async () => {
    const h = harness();
    await h.handler.handle(h.sock, [h.call('C', 'offer')]);
    h.state.refusing = true;
    await assert.rejects(h.handler.reject(h.sock, 'C'), Refused);
    h.state.refusing = false;
    assert.deepEqual(h.statuses(), [['C', 'offer']]);
    const rejected = await h.handler.reject(h.sock, 'C');
    const expected: EngineCall = {
      id: 'C',
      from: CALLER,
      status: 'rejected',
      isVideo: false,
      isGroup: false,
      timestamp: AT.getTime() + 5000,
    };
    assert.deepEqual(rejected, expected);
    assert.deepEqual(h.events.at(-1), { type: 'call', call: expected, platformId: 'call/C/end' });
    assert.deepEqual(h.rejects, ['C'], 'declined on the platform once');
    await assert.rejects(h.handler.reject(h.sock, 'C'), {
      code: 'conflict',
      message: 'call C is no longer ringing (rejected)',
    });
    await h.handler.handle(h.sock, [h.call('C', 'terminate')]);
    assert.deepEqual(h.statuses(), [
      ['C', 'offer'],
      ['C', 'rejected'],
    ]);
  });
});
