import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { BaileysEventMap } from 'baileys';
import type { SocketLike } from '../../src/engines/baileys/socket.ts';
import { SocketSlot } from '../../src/engines/baileys/socket-slot.ts';
import { FakeSocket, pairedCreds } from './fake-socket.ts';

/**
 * The one socket a lifecycle holds (docs/decisions/0025-live-engine.md): holding a socket wires the session's and the
 * lifecycle's listeners; holding another or ending the slot detaches them all before the socket ends, and a socket
 * whose `end` rejects is reported at debug level, never thrown.
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
    slot.end();
    assert.equal(slot.current, null);
    assert.equal(sock.ended, 1);
    assert.equal(heard.detached, 1);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(log.lines, [{ obj: { err: refusal }, msg: 'ending the socket failed' }]);
    // Ending an empty slot does nothing: no second end, no second detach.
    slot.end();
    assert.equal(sock.ended, 1);
    assert.equal(heard.detached, 1);
  });
});
