/**
 * `w:mex` queries (the platform's GraphQL-over-iq, Baileys' Socket/mex.js executeWMexQuery): an
 * `<iq xmlns="w:mex" type="get"><query query_id=…>{"variables":…}</query></iq>` answered with
 * `<result>` holding `{"data":{"<path>":…}}` as JSON bytes. Modelled: the account's reach-out timelock
 * (Baileys' fetchAccountReachoutTimelock reads `is_active`, `time_enforcement_ends` in Unix seconds as a string,
 * `enforcement_type`), set by the `reachout-lock` fault (model/restrictions.ts). Other queries: undefined.
 */
import { type BinaryNode, getBinaryNodeChild } from 'baileys';
import type { User } from '../model/accounts.ts';
import { reachoutTimelock } from '../model/restrictions.ts';

/** Baileys' QueryIds.REACHOUT_TIMELOCK (lib/Types/Mex.js). */
export const REACHOUT_TIMELOCK_QUERY = '23983697327930364';

/** The `<result>` content of a modelled `w:mex` query from `user`, or undefined for one not modelled. */
export function answerMex(iq: BinaryNode, user: User, now: number): BinaryNode[] | undefined {
  const query = getBinaryNodeChild(iq, 'query');
  if (query?.attrs.query_id !== REACHOUT_TIMELOCK_QUERY) return undefined;
  const lock = reachoutTimelock(user, now);
  const data = {
    data: {
      xwa2_fetch_account_reachout_timelock: {
        is_active: lock.active,
        time_enforcement_ends: lock.endsAt === undefined ? '0' : String(Math.ceil(lock.endsAt / 1000)),
        enforcement_type: 'DEFAULT',
      },
    },
  };
  return [{ tag: 'result', attrs: {}, content: Buffer.from(JSON.stringify(data)) }];
}
