import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { quiesce } from '../../src/engines/baileys/quiesce.ts';

/**
 * Quiescing a socket before a graceful close: stanzas being handled finish first (their events emitted while the
 * listeners are attached), stanzas arriving later never start on the ending socket, and a stuck handler holds the
 * close up only for the bound.
 */

/** A FIFO mutex with the shape of Baileys' `makeMutex` (each task runs after the previous one settled). */
function fifoMutex() {
  let tail: Promise<unknown> = Promise.resolve();
  return {
    mutex<T>(task: () => Promise<T>): Promise<T> {
      const run = tail.then(task);
      tail = run.catch(() => undefined);
      return run;
    },
  };
}

describe('quiescing a socket', () => {
  it('waits for the stanzas being handled, then lets none start, and flushes buffered events', async () => {
    const sock = {
      messageMutex: fifoMutex(),
      receiptMutex: fifoMutex(),
      notificationMutex: fifoMutex(),
      ev: { flushed: 0, flush: () => sock.ev.flushed++ },
    };
    const log: string[] = [];
    let finish = () => {};
    const inFlight = sock.messageMutex.mutex(async () => {
      log.push('decrypted');
      await new Promise<void>((resolve) => {
        finish = resolve;
      });
      log.push('receipt sent, upsert emitted');
    });
    const receipt = sock.receiptMutex.mutex(async () => {
      log.push('receipt handled');
    });
    const quiet = quiesce(sock, 10_000).then((all) => log.push(`quiet: ${all}`));
    // Arrives after the close began: must never run on this socket.
    void sock.messageMutex.mutex(async () => {
      log.push('later stanza decrypted');
    });
    await tick();
    assert.deepEqual(log, ['decrypted', 'receipt handled'], 'the close waits for the message in progress');
    finish();
    await inFlight;
    await receipt;
    await quiet;
    for (let i = 0; i < 5; i++) await tick();
    assert.deepEqual(log, ['decrypted', 'receipt handled', 'receipt sent, upsert emitted', 'quiet: true']);
    assert.equal(sock.ev.flushed, 1);
  });

  it('gives up waiting on a stuck handler after the bound', async () => {
    const sock = { messageMutex: fifoMutex() };
    void sock.messageMutex.mutex(() => new Promise<never>(() => {}));
    assert.equal(await quiesce(sock, 50), false);
  });

  it('is immediate on a socket without stanza mutexes (a fake)', async () => {
    assert.equal(await quiesce({ ev: {} }, 10_000), true);
  });
});
