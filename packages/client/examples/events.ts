// Reads the event log from a stored position to its end, then stops. Run: PARLEY_URL=… PARLEY_KEY=… node events.ts
import { createParleyClient } from '@parley/client';

const parley = createParleyClient({
  baseUrl: process.env.PARLEY_URL ?? 'http://localhost:8080',
  apiKey: process.env.PARLEY_KEY ?? '',
});

const after = Number(process.env.AFTER ?? 0); // where the last run stopped (its cursor)
const events = parley.events({ after, types: ['Message'], follow: false });
for await (const event of events) {
  const { message } = event.event as { message?: { conversation?: string } };
  console.log(`#${event.sequence} ${event.type}: ${message?.conversation ?? '(not a text)'}`);
}
console.log(`up to date; next time start after ${events.cursor}`);
