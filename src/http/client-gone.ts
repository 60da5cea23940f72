import type { FastifyReply } from 'fastify';
import { DomainError } from '../domain/errors.ts';
import { type WaitSignal, Withdrawal } from '../domain/withdrawal.ts';

/**
 * A signal that aborts when the client of `reply` goes away before its answer was written (its connection closed
 * first), so work done for it may stop waiting on its behalf: a synchronous send's wait is withdrawn, and the
 * send's outcome is recorded as a `MessageStatus` event instead (docs/decisions/0009-sends-as-jobs.md). The abort's
 * reason is a DomainError `timeout`, answered to nobody. A {@link Withdrawal}, not an `AbortSignal`: every
 * synchronous send makes one (src/domain/withdrawal.ts).
 */
export function clientGone(reply: FastifyReply): WaitSignal {
  const gone = new Withdrawal();
  const response = reply.raw;
  response.once('close', () => {
    if (!response.writableFinished) {
      gone.withdraw(new DomainError('timeout', 'the client closed its connection before the answer'));
    }
  });
  return gone;
}
