// A webhook receiver (plain HTTP: put it behind your HTTPS proxy). Every request is verified before it is parsed.
// Run: PARLEY_HMAC_KEY=… RECEIVER_PORT=8787 node receiver.ts
import { createServer } from 'node:http';
import { verifyWebhook, WebhookVerificationError } from '@parley/client';

const hmacKey = process.env.PARLEY_HMAC_KEY ?? '';
const port = Number(process.env.RECEIVER_PORT ?? 8787);

createServer(async (request, response) => {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  try {
    // the raw bytes, exactly as received: parsed and re-serialised JSON would not verify
    const { id, payload } = await verifyWebhook({
      body: Buffer.concat(chunks),
      headers: request.headers,
      hmacKey,
    });
    console.log(`verified ${payload.type} #${payload.sequence} (webhook-id ${id})`);
    response.writeHead(204).end(); // answer at once, process later; deduplicate on webhook-id
  } catch (error) {
    if (!(error instanceof WebhookVerificationError)) throw error;
    console.log(`refused: ${error.message}`);
    response.writeHead(401).end();
  }
}).listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}`));
