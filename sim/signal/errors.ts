/** A Signal operation that failed: no session to encrypt with, or a message that does not decrypt. */
export class SignalError extends Error {
  override readonly name = 'SignalError';
}
