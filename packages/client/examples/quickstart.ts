// Links the sandbox instance, sends a text, and shows an error answer. Run: PARLEY_URL=… PARLEY_KEY=… node quickstart.ts
import { createParleyClient, ParleyError } from '@parley/client';

const parley = createParleyClient({
  baseUrl: process.env.PARLEY_URL ?? 'http://localhost:8080',
  apiKey: process.env.PARLEY_KEY ?? '',
  retries: 3, // 429, 503 and lost connections; POSTs keep one Idempotency-Key across retries
});

// Link the account: connect, then (sandbox only) play the phone that scans the QR code.
const connected = await parley.session.connect();
console.log(`connected: ${connected.details}`);
await parley.post('/v1/sandbox/scan', { body: { phone: '5511999990001' } });
const status = await parley.session.status();
console.log(`logged in: ${status.loggedIn} as ${status.jid}`);

// Send a text: the answer's data, typed.
const sent = await parley.sendText({ phone: '5511988887777', body: 'Your order 1042 has shipped' });
if ('timestamp' in sent) console.log(`sent ${sent.id} at ${sent.timestamp}`);

// An error answer is a ParleyError: HTTP status, parley's code and message.
try {
  await parley.sendText({ phone: '5511977770000', body: 'Hello?' });
} catch (error) {
  if (!(error instanceof ParleyError)) throw error;
  console.log(`refused: ${error.status} ${error.code}: ${error.message}`);
}
