/**
 * The live engine's media download (src/engines/baileys/media-download.ts) when a real HTTPS media host answers an
 * error status instead of the file. A 5xx is a fault of the host (RFC 9110 section 15.6), which a later try may not
 * meet: `platform_unreachable`, answered 503 by `GET /v1/messages/{id}/media`, so the client retries. So is a 429
 * (RFC 6585 §4: the host limits how fast this address fetches), with `Retry-After` from the host's own header or 5 s.
 * Any other 4xx refuses the request: 403, 404 and 410 say the link is dead (`gone`, 410), any other is
 * `platform_refused` (502).
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

describe('live media download: a media host answering an error status', () => {
  let server: Server;
  let port: number;
  let agent: ReturnType<typeof mediaUploadAgent>;
  const asked: string[] = [];

  before(async () => {
    trustSimulatorMediaHost('ws://127.0.0.1:1/');
    const tls = await createMediaTls();
    agent = mediaUploadAgent(tls.ca);
    // `/status/<n>/…` answers HTTP <n> with a short body, as a media host (or the gateway in front of it) does;
    // `/status/<n>-wait-<s>/…` adds `Retry-After: <s>`.
    server = createServer({ cert: tls.server.cert, key: tls.server.key }, (req, res) => {
      asked.push(req.url ?? '');
      const [, code, wait] = /^\/status\/(\d{3})(?:-wait-([^/]+))?\//.exec(req.url ?? '') ?? [];
      const status = Number(code ?? 500);
      res.writeHead(status, {
        'content-type': 'text/plain',
        ...(wait === undefined ? {} : { 'retry-after': decodeURIComponent(wait) }),
      });
      res.end(`status ${status}`);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const reference = (status: number, wait?: string) =>
    JSON.stringify({
      type: 'document',
      mediaKey: Buffer.alloc(32, 3).toString('base64'),
      url: `https://127.0.0.1:${port}/status/${status}${wait === undefined ? '' : `-wait-${encodeURIComponent(wait)}`}/v/t62.7118-24/file.enc`,
    });

  /** The DomainError downloading the file of a host answering `status` rejects with. */
  async function failure(status: number, wait?: string): Promise<DomainError> {
    const before = asked.length;
    let caught: unknown;
    try {
      await downloadPlatformMedia(reference(status, wait), 'S1', 1024 * 1024, agent);
    } catch (error) {
      caught = error;
    }
    assert.equal(asked.length, before + 1, 'the host was asked once');
    assert.ok(caught instanceof DomainError, `a DomainError, got ${String(caught)}`);
    return caught;
  }

  for (const status of [500, 502, 503, 504]) {
    it(`an HTTP ${status} is platform_unreachable (a transient fault of the host), not platform_refused`, async () => {
      const error = await failure(status);
      assert.equal(error.code, 'platform_unreachable');
      assert.equal(
        error.message,
        `the platform's media host could not serve the file right now (it answered HTTP ${status}); retry shortly`,
      );
    });
  }

  for (const status of [403, 404, 410]) {
    it(`an HTTP ${status} is gone (the link is dead)`, async () => {
      const error = await failure(status);
      assert.equal(error.code, 'gone');
      assert.match(error.message, new RegExp(`\\(the host answered HTTP ${status}\\)`));
    });
  }

  const busy = (seconds: number) =>
    `the platform's media host is limiting requests right now (it answered HTTP 429); retry in ${seconds} s`;
  it('an HTTP 429 is platform_unreachable with the Retry-After the host asked for, 5 s when it asked none', async () => {
    const answers = [];
    for (const wait of [undefined, '30', '0', '86400', 'soon']) {
      const error = await failure(429, wait);
      answers.push([error.code, error.retryAfter, error.message]);
    }
    const date = await failure(429, new Date(Date.now() + 120_000).toUTCString());
    assert.deepEqual(answers, [
      ['platform_unreachable', 5, busy(5)],
      ['platform_unreachable', 30, busy(30)],
      ['platform_unreachable', 1, busy(1)],
      ['platform_unreachable', 3600, busy(3600)],
      ['platform_unreachable', 5, busy(5)],
    ]);
    // An HTTP-date: the seconds until it, rounded up (the second it is sent in may have begun).
    assert.ok(
      date.retryAfter !== undefined && date.retryAfter >= 119 && date.retryAfter <= 121,
      `${date.retryAfter}`,
    );
  });

  for (const status of [400, 451]) {
    it(`an HTTP ${status} stays platform_refused`, async () => {
      const error = await failure(status);
      assert.equal(error.code, 'platform_refused');
      assert.equal(error.message, `the platform's media host answered HTTP ${status}`);
    });
  }

  it('GET /v1/messages/{id}/media answers 503 for a host answering 500 or 503, 503 with Retry-After for 429, 502 for 400, 410 for 404', async () => {
    const t = await createTestApp({ liveEngine: downloadingEngine(agent) });
    try {
      const live = await t.newInstance('live', 'live');
      const key = await t.newKey({ env: 'live' });
      const answers: Record<number, { status: number; message: string; retryAfter?: string }> = {};
      for (const status of [500, 503, 400, 404, 429]) {
        const id = `AABBCCDD${status}`;
        await t.services.recorder.record(live.id, {
          type: 'message',
          message: {
            id,
            source: {
              chat: '5511999990002@s.whatsapp.net',
              sender: '5511999990002@s.whatsapp.net',
              isFromMe: false,
              isGroup: false,
            },
            pushName: 'Ana',
            timestamp: t.clock(),
            content: {
              kind: 'document',
              mimetype: 'application/pdf',
              fileName: 'a.pdf',
              download: reference(status, status === 429 ? '30' : undefined),
            },
          },
        });
        const res = await t.app.inject({
          method: 'GET',
          url: `/v1/messages/${id}/media?from=${live.id}`,
          headers: { authorization: `Bearer ${key}` },
        });
        const retryAfter = res.headers['retry-after'];
        answers[status] = {
          status: res.statusCode,
          message: res.json().error?.message ?? res.body,
          ...(typeof retryAfter === 'string' ? { retryAfter } : {}),
        };
      }
      assert.deepEqual(answers, {
        500: {
          status: 503,
          message:
            "the platform's media host could not serve the file right now (it answered HTTP 500); retry shortly",
        },
        503: {
          status: 503,
          message:
            "the platform's media host could not serve the file right now (it answered HTTP 503); retry shortly",
        },
        400: { status: 502, message: "the platform's media host answered HTTP 400" },
        404: {
          status: 410,
          message:
            'the platform no longer has the media of message AABBCCDD404: its media links expire after a while ' +
            '(the host answered HTTP 404), and parley had not kept a copy',
        },
        429: { status: 503, message: busy(30), retryAfter: '30' },
      });
    } finally {
      await t.close();
    }
  });
});
