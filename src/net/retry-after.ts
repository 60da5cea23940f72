/**
 * Parses a `Retry-After` header (RFC 9110 §10.2.3): delta-seconds or an HTTP-date. Read from a webhook receiver's
 * answer (src/webhooks/backoff.ts) and from the platform's media host (src/engines/baileys/media-download.ts).
 * @param nowMs the current time, epoch ms (for the HTTP-date form).
 * @returns the delay in milliseconds (≥ 0), or undefined when absent or unparseable.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - nowMs);
}
