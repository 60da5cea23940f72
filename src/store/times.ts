/**
 * Times at the store's edge (docs/decisions/0027-times-as-epoch-ms.md): every time column holds epoch milliseconds
 * (migration 0015); the records the store hands to the rest of parley keep RFC 3339 UTC text where they always had
 * it (what the API shows, docs/decisions/0001-envelope-and-error-codes.md). These two conversions are the only
 * place the forms meet.
 */

/**
 * Epoch ms (a column's value; PostgreSQL's `bigint` arrives as a number, see `openStore`) as RFC 3339 UTC with
 * milliseconds and `Z` (`Date#toISOString`); null stays null.
 * @throws RangeError when `ms` is not a finite time.
 */
export function toIso(ms: number): string;
export function toIso(ms: number | null): string | null;
export function toIso(ms: number | null): string | null {
  return ms === null ? null : new Date(Number(ms)).toISOString();
}

/**
 * RFC 3339 text as epoch ms, for a column or a comparison with one; null stays null. Sub-millisecond digits are
 * dropped (`Date.parse`).
 * @throws RangeError when `iso` is not a time `Date.parse` reads.
 */
export function toMs(iso: string): number;
export function toMs(iso: string | null): number | null;
export function toMs(iso: string | null): number | null {
  if (iso === null) return null;
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) throw new RangeError(`not a time: ${iso}`);
  return ms;
}
