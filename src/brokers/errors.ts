import { withTimeout } from '../domain/time-limit.ts';

/**
 * Why a publish to a broker endpoint failed (docs/decisions/0037-broker-endpoints.md). `message` is what the
 * tenant reads in the endpoint's delivery log: it never holds a resolved address or a credential; the cause, when
 * there is one, goes to the server log only.
 */
export class BrokerError extends Error {
  override readonly name = 'BrokerError';
}

/** `code` of a Node.js system error (`ECONNREFUSED`, …), if `error` has one. */
function errorCode(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'code' in error) {
    const { code } = error;
    if (typeof code === 'string' || typeof code === 'number') return String(code);
  }
  return undefined;
}

/** Most characters of a broker's own error text kept in a {@link BrokerError}. */
const SERVER_TEXT_CHARS = 200;

/**
 * Waits for `opening`, a connection being opened, at most `timeoutMs` milliseconds. When it fails or the time runs
 * out, a connection that opens later is closed with `close` (never left open behind the error), and `failed` runs
 * when it does not open at all (to close what it had opened so far).
 * @throws BrokerError `connecting to the broker timed out after <timeoutMs> ms`, or {@link connectError} of the
 *   opening's error.
 */
export async function openWithin<T>(
  opening: Promise<T>,
  timeoutMs: number,
  close: (connection: T) => Promise<unknown>,
  failed: () => Promise<unknown> = async () => undefined,
): Promise<T> {
  try {
    return await withTimeout(
      opening,
      timeoutMs,
      () => new BrokerError(`connecting to the broker timed out after ${timeoutMs} ms`),
    );
  } catch (error) {
    opening.then(
      (connection) => close(connection).catch(() => undefined),
      () => failed().catch(() => undefined),
    );
    throw connectError(error);
  }
}

/**
 * A {@link BrokerError} for a failure to connect or to log in: a system error reads `could not connect to the broker
 * (ECONNREFUSED)`, anything else `the broker refused the connection: <its text, cut to 200 characters>`.
 */
export function connectError(error: unknown): BrokerError {
  if (error instanceof BrokerError) return error;
  const code =
    errorCode(error) ??
    (error instanceof Error && error.cause !== undefined ? errorCode(error.cause) : undefined);
  if (code !== undefined && /^E[A-Z]+$/.test(code)) {
    return new BrokerError(`could not connect to the broker (${code})`, { cause: error });
  }
  const text = error instanceof Error ? error.message : String(error);
  return new BrokerError(`the broker refused the connection: ${text.slice(0, SERVER_TEXT_CHARS)}`, {
    cause: error,
  });
}

/**
 * Texts of a connection or channel that ended under a publish, not a refusal: amqplib's `channel closed` and
 * `Connection closed: …`, the NATS client's `closed connection`, `connection disconnected`, `connection draining`.
 */
const CONNECTION_LOST =
  /\b(channel|connection)\b.*\b(closed|ended|lost|disconnected|draining)\b|closed connection|CONNECTION_CLOSED/i;

/** RabbitMQ closing a channel for the message itself (`Channel closed by server: 404 (NOT-FOUND) …`): a refusal. */
const CLOSED_FOR_THE_MESSAGE = /closed by server: 4\d\d/i;

/**
 * A {@link BrokerError} for an error during a publish: `the connection to the broker ended before it answered: <its
 * text>` when the connection or channel went away under it (the message may or may not have been taken), else `the
 * broker refused the message: <its text>` (a nack, a stream's limits).
 */
export function publishError(error: unknown): BrokerError {
  if (error instanceof BrokerError) return error;
  const text = error instanceof Error ? error.message : String(error);
  if (
    !CLOSED_FOR_THE_MESSAGE.test(text) &&
    (CONNECTION_LOST.test(text) || errorCode(error)?.startsWith('E'))
  ) {
    return new BrokerError(
      `the connection to the broker ended before it answered: ${text.slice(0, SERVER_TEXT_CHARS)}`,
      {
        cause: error,
      },
    );
  }
  return new BrokerError(`the broker refused the message: ${text.slice(0, SERVER_TEXT_CHARS)}`, {
    cause: error,
  });
}
