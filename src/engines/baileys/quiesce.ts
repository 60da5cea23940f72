/**
 * Quiescing a Baileys socket before a graceful close (a node stopping or handing an instance over,
 * docs/decisions/0008-leases-and-fencing.md).
 *
 * Baileys handles each incoming message stanza inside a per-socket mutex: it decrypts (advancing and storing the
 * Signal session), sends the receipt, then emits `messages.upsert`. Ending the socket in the middle of that leaves
 * a message decrypted, its ratchet step stored, but never emitted to parley and never acknowledged: the platform
 * hands it to the next owner, which cannot decrypt it any more (its key was used). Quiescing waits for the stanzas
 * being handled to finish, while the session's listeners are still attached so their events are recorded, and keeps
 * the mutexes held for good so no later stanza starts on a socket about to end: those stay unacknowledged and the
 * platform hands them, still decryptable, to the next owner.
 */

/** Baileys' per-socket serialiser of one kind of stanza (`makeMutex` in Baileys' `Utils/make-mutex`). */
interface StanzaMutex {
  mutex<T>(task: () => Promise<T>): Promise<T>;
}

/** The socket fields Baileys 7 serialises incoming stanzas with: messages, receipts, notifications. */
const MUTEXES = ['messageMutex', 'receiptMutex', 'notificationMutex'] as const;

/** The part of a Baileys socket quiescing uses; every field optional (a test's fake socket has none). */
export interface QuiescibleSocket {
  messageMutex?: unknown;
  receiptMutex?: unknown;
  notificationMutex?: unknown;
  /** Baileys' event emitter; its `flush()` releases buffered events. */
  ev?: object;
}

function isMutex(value: unknown): value is StanzaMutex {
  return (
    typeof value === 'object' && value !== null && typeof (value as { mutex?: unknown }).mutex === 'function'
  );
}

/**
 * Takes every stanza mutex of `sock` and never gives it back, then flushes Baileys' event buffer so what the
 * finished handlers emitted reaches the listeners. Waits at most `timeoutMs` milliseconds for the handlers in
 * progress (one stuck on the platform must not hold a stop up); → true when every mutex was taken in time.
 * Never throws. The socket must be ended afterwards: it no longer handles incoming stanzas.
 */
export async function quiesce(sock: QuiescibleSocket, timeoutMs: number): Promise<boolean> {
  const taken = MUTEXES.flatMap((name) => {
    const mutex = sock[name];
    if (!isMutex(mutex)) return [];
    return [
      new Promise<void>((acquired) => {
        mutex
          .mutex(() => {
            acquired();
            // Held until the socket is garbage: the stanzas queued behind it never run on this socket.
            return new Promise<never>(() => {});
          })
          .catch(() => acquired());
      }),
    ];
  });
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    const all = await Promise.race([Promise.all(taken).then(() => true as const), expired]);
    try {
      const ev = sock.ev as { flush?: unknown } | undefined;
      if (typeof ev?.flush === 'function') ev.flush();
    } catch {
      // a buffer that cannot flush loses nothing more than the close would
    }
    return all;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * {@link quiesce} for a graceful close: waits at most `timeoutMs` milliseconds, and a socket whose stanzas were still
 * being handled then is logged as a warning on `logger` (its stanzas are cut as the close cuts them). Never throws.
 */
export async function quiesceOrWarn(
  sock: QuiescibleSocket,
  timeoutMs: number,
  logger: { warn(obj: unknown, msg?: string): void },
): Promise<void> {
  const quiet = await quiesce(sock, timeoutMs);
  if (!quiet)
    logger.warn(
      { waitedMs: timeoutMs },
      'incoming messages were still being handled when the socket was closed',
    );
}
