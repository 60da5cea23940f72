import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { BaileysEventMap } from 'baileys';
import type { SocketLike } from '../../src/engines/baileys/socket.ts';
import { SocketSlot } from '../../src/engines/baileys/socket-slot.ts';
import { FakeSocket, pairedCreds } from './fake-socket.ts';

/**
 * The one socket a lifecycle holds (docs/decisions/0025-live-engine.md): holding a socket wires the session's and the
 * lifecycle's listeners; holding another or ending the slot detaches them all before the socket ends, and a socket
 * whose `end` rejects is reported at debug level, never thrown. A hand-over gives the one-socket lock up only once the
 * socket is closed.
 */

/** A fake socket whose config carries paired credentials (the slot reads nothing of it). */
const socket = () => new FakeSocket({ auth: { creds: pairedCreds(), keys: {} as never } });

/** A logger recording its debug lines. */
function debugLog() {
  const lines: { obj: unknown; msg: string | undefined }[] = [];
  return { lines, debug: (obj: unknown, msg?: string) => lines.push({ obj, msg }) };
}

/** The lifecycle's listeners, recording what reached them, and the session's attach, recording its detaches. */
function listeners() {
  const updates: BaileysEventMap['connection.update'][] = [];
  let creds = 0;
  let detached = 0;
  const attached: SocketLike[] = [];
  return {
    updates,
    get creds() {
      return creds;
    },
    get detached() {
      return detached;
    },
    attached,
    attach: (sock: SocketLike) => {
      attached.push(sock);
      return () => {
        detached += 1;
      };
    },
    own: {
      connection: (update: BaileysEventMap['connection.update']) => updates.push(update),
      creds: () => {
        creds += 1;
      },
    },
  };
}

describe('SocketSlot: one socket at a time with everything attached to it', () => {
  it('holding a socket attaches the session and the lifecycle; both hear its events', () => {
    const slot = new SocketSlot(debugLog());
    const heard = listeners();
    const first = socket();
    assert.equal(slot.current, null);
    slot.hold(first, heard.attach, heard.own);
    assert.equal(slot.current, first);
    assert.deepEqual(heard.attached, [first]);
    first.emit('connection.update', { connection: 'open' });
    first.emit('creds.update', {});
    assert.deepEqual(heard.updates, [{ connection: 'open' }]);
    assert.equal(heard.creds, 1);
  });

  it('holding another socket ends the first and detaches everything from it first', () => {
    const slot = new SocketSlot(debugLog());
    const heard = listeners();
    const first = socket();
    const second = socket();
    slot.hold(first, heard.attach, heard.own);
    slot.hold(second, heard.attach, heard.own);
    assert.equal(first.ended, 1);
    assert.equal(second.ended, 0);
    assert.equal(heard.detached, 1, "the session's listeners left the first socket");
    assert.equal(first.events.listenerCount('connection.update'), 0);
    assert.equal(first.events.listenerCount('creds.update'), 0);
    // A late event of the replaced socket reaches nobody; the held one's still do.
    first.emit('connection.update', { connection: 'close' });
    second.emit('connection.update', { qr: 'ref,key' });
    assert.deepEqual(heard.updates, [{ qr: 'ref,key' }]);
    assert.equal(slot.current, second);
  });

  it('end() leaves the slot empty; a socket whose end rejects is logged at debug, never thrown', async () => {
    const log = debugLog();
    const slot = new SocketSlot(log);
    const heard = listeners();
    const sock = socket();
    const refusal = new Error('Connection Closed');
    sock.end = async () => {
      sock.ended += 1;
      throw refusal;
    };
    slot.hold(sock, heard.attach, heard.own);
    const ended = slot.end();
    assert.equal(slot.current, null);
    assert.equal(sock.ended, 1);
    assert.equal(heard.detached, 1);
    await ended;
    assert.deepEqual(log.lines, [{ obj: { err: refusal }, msg: 'ending the socket failed' }]);
    assert.equal(sock.terminated, 1, 'an end that failed closes nothing: the WebSocket is destroyed');
    // Ending an empty slot does nothing: no second end, no second detach.
    slot.end();
    assert.equal(sock.ended, 1);
    assert.equal(heard.detached, 1);
  });

  it('handOver releases the lock once the socket is closed, and only after every earlier hand-over', async () => {
    const slot = new SocketSlot(debugLog());
    const heard = listeners();
    const sock = socket();
    sock.frozen = true;
    slot.hold(sock, heard.attach, heard.own);
    const released: string[] = [];
    const lock = (name: string) => ({
      held: true,
      acquire: async () => ({ acquired: true as const }),
      release: async () => {
        released.push(`${name}, the WebSocket ${sock.ws.socket.readyState === 3 ? 'closed' : 'open'}`);
      },
    });
    const first = slot.handOver(lock('first'));
    // Nothing is held any more, but the first hand-over's socket is still closing.
    const second = slot.handOver(lock('second'));
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(released, [], 'the close frame is not answered yet: no lock released');
    assert.equal(sock.ended, 1);
    // The peer answers (within the bound): both locks go, in order.
    sock.ws.socket.close();
    await second;
    await first;
    await slot.handedOver;
    assert.deepEqual(released, ['first, the WebSocket closed', 'second, the WebSocket closed']);
    assert.equal(sock.terminated, 0, 'answered in time: not destroyed');
  });
});
