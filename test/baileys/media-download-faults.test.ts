/**
 * The live engine's media download (src/engines/baileys/media-download.ts) when the media host breaks the
 * body off or trickles it. The docstring promises `platform_unreachable` (503) "when the host cannot be reached
 * (DNS, TLS, connection, timeout)" and MEDIA_DOWNLOAD_TIMEOUT_MS is the "time allowed to fetch one file (connect,
 * TLS, whole body)".
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createMediaTls } from '../../sim/media/tls.ts';
import { DomainError } from '../../src/domain/errors.ts';
import { downloadPlatformMedia, trustSimulatorMediaHost } from '../../src/engines/baileys/media-download.ts';
import { mediaUploadAgent } from '../../src/engines/baileys/platform.ts';
import { createTestApp } from '../support/app.ts';
import { downloadingEngine } from './downloading-engine.ts';

async function collect(source: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of source) chunks.push(chunk);
  return Buffer.concat(chunks);
}

describe('live media download: a body broken off or trickled by the media host', () => {
  let server: Server;
  let port: number;
  let agent: ReturnType<typeof mediaUploadAgent>;
  before(async () => {
    trustSimulatorMediaHost('ws://127.0.0.1:1/');
    const tls = await createMediaTls();
    agent = mediaUploadAgent(tls.ca);
    server = createServer({ cert: tls.server.cert, key: tls.server.key }, (req, res) => {
      if (req.url?.startsWith('/cut')) {
        res.writeHead(200, { 'content-length': String(1024 * 1024) });
        res.write(Buffer.alloc(64 * 1024, 1));
        setTimeout(() => res.socket?.destroy(), 50);
        return;
      }
      // /slow: 16 bytes every 100 ms for 3 s
      res.writeHead(200, { 'content-length': String(30 * 16) });
      let n = 0;
      const timer = setInterval(() => {
        res.write(Buffer.alloc(16, 2));
        n += 1;
        if (n === 30) {
          clearInterval(timer);
          res.end();
        }
      }, 100);
      res.on('close', () => clearInterval(timer));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const reference = (path: string) =>
    JSON.stringify({
      type: 'document',
      mediaKey: Buffer.alloc(32, 3).toString('base64'),
      url: `https://127.0.0.1:${port}${path}`,
    });

  it('a connection the host breaks off mid-body is platform_unreachable (503), not a raw error (500)', async () => {
    await assert.rejects(
      collect(await downloadPlatformMedia(reference('/cut'), 'C1', 10 * 1024 * 1024, agent)),
      (error: unknown) => {
        assert.ok(error instanceof DomainError, `a DomainError, got ${String(error)}`);
        assert.equal(error.code, 'platform_unreachable');
        return true;
      },
    );
  });

  it('a body trickled past the time allowed is cut off at that time (platform_unreachable)', async () => {
    // The host takes 3 s for the whole body; 500 ms are allowed. Read to its end the body would fail its MAC check
    // (platform_refused): the deadline ends it first.
    await assert.rejects(
      collect(await downloadPlatformMedia(reference('/slow'), 'C2', 10 * 1024 * 1024, agent, 500)),
      (error: unknown) => {
        assert.ok(error instanceof DomainError, `a DomainError, got ${String(error)}`);
        assert.equal(error.code, 'platform_unreachable', error.message);
        return true;
      },
    );
  });
});

describe('live media download through GET /v1/messages/{id}/media: a body broken off by the media host', () => {
  it('answers 503 (the platform media host cannot be reached), not 400 "request was aborted by the client"', async () => {
    const tls = await createMediaTls();
    trustSimulatorMediaHost('ws://127.0.0.1:1/');
    const agent = mediaUploadAgent(tls.ca);
    const server = createServer({ cert: tls.server.cert, key: tls.server.key }, (_req, res) => {
      res.writeHead(200, { 'content-length': String(1024 * 1024) });
      res.write(Buffer.alloc(64 * 1024, 1));
      setTimeout(() => res.socket?.destroy(), 50);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const t = await createTestApp({ liveEngine: downloadingEngine(agent) });
    try {
      const live = await t.newInstance('live', 'live');
      const key = await t.newKey({ env: 'live' });
      const download = JSON.stringify({
        type: 'document',
        mediaKey: Buffer.alloc(32, 3).toString('base64'),
        url: `https://127.0.0.1:${port}/v/x.enc`,
      });
      await t.services.recorder.record(live.id, {
        type: 'message',
        message: {
          id: 'AABBCCDD0011',
          source: {
            chat: '5511999990002@s.whatsapp.net',
            sender: '5511999990002@s.whatsapp.net',
            isFromMe: false,
            isGroup: false,
          },
          pushName: 'Ana',
          timestamp: t.clock(),
          content: { kind: 'document', mimetype: 'application/pdf', fileName: 'a.pdf', download },
        },
      });
      const res = await t.app.inject({
        method: 'GET',
        url: `/v1/messages/AABBCCDD0011/media?from=${live.id}`,
        headers: { authorization: `Bearer ${key}` },
      });
      assert.equal(res.statusCode, 503, res.body);
    } finally {
      await t.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
