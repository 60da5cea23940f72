// Follows the messages live over the event stream until Ctrl-C (or COUNT of them). Run: PARLEY_URL=… PARLEY_KEY=… node stream.ts
import { createParleyClient } from '@parley/client';

const parley = createParleyClient({
  baseUrl: process.env.PARLEY_URL ?? 'http://localhost:8080',
  apiKey: process.env.PARLEY_KEY ?? '',
});

const stop = new AbortController();
process.once('SIGINT', () => stop.abort());
process.once('SIGTERM', () => stop.abort());
const count = Number(process.env.COUNT ?? Number.POSITIVE_INFINITY);

let seen = 0;
const after = Number(process.env.AFTER ?? 0); // where the last run stopped (its cursor)
const events = parley.events({ after, types: ['Message'], transport: 'stream', signal: stop.signal });
for await (const event of events) {
  const { message } = event.event as { message?: { conversation?: string } };
  console.log(`#${event.sequence} ${event.type}: ${message?.conversation ?? '(not a text)'}`);
  if (++seen >= count) stop.abort();
}
console.log(`stopped; next time start after ${events.cursor}`);
