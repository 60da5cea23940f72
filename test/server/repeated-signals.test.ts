/**
 * A signal repeated during the graceful stop never cuts it short (docs/decisions/0023-operations.md): the repeat is
 * logged ("already stopping"), the request in flight is still answered and the process exits 0. Without a listener
 * for the repeat, Node's default action would kill the process at once.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startReceiver, TEST_CA } from '../support/https-receiver.ts';
import { cleanEnv, Output, ROOT } from '../support/parley-process.ts';

interface Stopped {
  code: number | null;
  signal: string | null;
  status: string | undefined;
  stopped: boolean;
  repeatLogged: boolean;
}

/** Starts `parley serve` with a send whose image fetch is held, sends `signals` during the stop, then lets it go. */
async function stopWith(signals: NodeJS.Signals[]): Promise<Stopped> {
  let release = (): void => undefined;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const image = readFileSync(join(ROOT, 'test/fixtures/media/tiny.png'));
  const media = await startReceiver({ respond: () => released.then(() => ({ status: 200, body: image })) });
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-signals-'));
  const caFile = join(dataDir, 'ca.pem');
  writeFileSync(caFile, TEST_CA);
  const child = spawn(process.execPath, ['bin/parley.js', 'serve'], {
    cwd: ROOT,
    env: {
      ...cleanEnv(),
      DATA_DIR: dataDir,
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      OUTBOUND_CA_FILE: caFile,
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = new Output(child);
  const exited = new Promise<[number | null, string | null]>((resolve) =>
    child.once('exit', (code, signal) => resolve([code, signal])),
  );
  try {
    const [key] = await output.waitFor(/svc_test_[0-9A-Za-z]{38}/, 'the first-boot key', exited);
    const url = /"url":"(http:\/\/[^"]+)"/.exec(output.text)?.[1] ?? '';
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    await fetch(`${url}/v1/session/connect`, { method: 'POST', headers, body: '{}' });
    await fetch(`${url}/v1/sandbox/scan`, { method: 'POST', headers, body: '{"phone":"5511999990001"}' });
    // A request in flight: a send whose image the receiver holds.
    const socket = connect(Number(new URL(url).port), '127.0.0.1');
    socket.on('error', () => undefined);
    let received = '';
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString();
    });
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    const body = JSON.stringify({ phone: '5511999990002', image: media.url });
    socket.write(
      `POST /v1/messages/send/image HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    await media.waitForCount(1, 30_000);
    const [first, ...repeats] = signals;
    child.kill(first);
    await output.waitFor(/"msg":"shutting down"/, 'the stop', exited);
    for (const signal of repeats) child.kill(signal);
    // The repeats are seen (or, without a listener, the process is gone) before the image comes.
    const repeatPattern = new RegExp(`("msg":"already stopping"[^\\n]*\\n[^]*){${repeats.length}}`);
    await Promise.race([
      output.waitFor(repeatPattern, 'the repeats logged', exited).catch(() => undefined),
      exited,
    ]);
    release();
    const [code, signal] = await exited;
    await closed;
    return {
      code,
      signal,
      status: /HTTP\/1\.1 (\d{3})/.exec(received)?.[1],
      stopped: output.text.includes('"msg":"stopped"'),
      repeatLogged: repeatPattern.test(output.text),
    };
  } finally {
    child.kill('SIGKILL');
    await media.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const graceful: Stopped = { code: 0, signal: null, status: '200', stopped: true, repeatLogged: true };

describe('a signal repeated during the graceful stop (docs/decisions/0023-operations.md)', () => {
  it('SIGTERM twice: the send in flight is answered, the repeat logged, exit 0', async () => {
    assert.deepEqual(await stopWith(['SIGTERM', 'SIGTERM']), graceful);
  });

  it('SIGINT twice (a Ctrl-C npm hands on again): the same, no force-quit', async () => {
    assert.deepEqual(await stopWith(['SIGINT', 'SIGINT']), graceful);
  });

  it('SIGTERM then SIGINT: the same', async () => {
    assert.deepEqual(await stopWith(['SIGTERM', 'SIGINT']), graceful);
  });
});
