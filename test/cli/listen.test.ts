import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHmac, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Output, type ParleyProcess, ROOT, startParley } from '../support/parley-process.ts';

const HMAC_KEY = 'listen-test-hmac-key-0123456789abcdef';

/** Calls the running parley with its first-boot key; returns the parsed body. */
async function api(parley: ParleyProcess, method: string, path: string, body?: object): Promise<any> {
  const response = await fetch(`${parley.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${parley.key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return response.json();
}

/** Posts `body` with `headers` to the listener over HTTPS, trusting `ca`; returns the status. */
function postToListener(
  url: string,
  ca: string,
  body: string,
  headers: Record<string, string>,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', ca, headers: { 'content-type': 'application/json', ...headers } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('parley listen --webhook: a local HTTPS receiver against a running parley', () => {
  let dataDir: string;
  let caPath: string;
  let parley: ParleyProcess;
  let listener: ChildProcess;
  let listenerExited: Promise<number | null>;
  let output: Output;
  let stdout = '';
  let receiverUrl = '';

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'parley-listen-'));
    const printed = spawnSync(process.execPath, ['bin/parley.js', 'listen', '--print-ca'], {
      cwd: ROOT,
      env: { ...process.env, DATA_DIR: dataDir },
      encoding: 'utf8',
    });
    assert.equal(printed.status, 0, printed.stderr);
    caPath = printed.stdout.trim();
    parley = await startParley({ WEBHOOK_ALLOWED_CIDRS: '127.0.0.1/32', OUTBOUND_CA_FILE: caPath }, dataDir);
    listener = spawn(
      process.execPath,
      [
        'bin/parley.js',
        'listen',
        '--webhook',
        '--url',
        parley.url,
        '--key',
        parley.key,
        '--json',
        '--hmac-key',
        HMAC_KEY,
      ],
      { cwd: ROOT, env: parley.env, stdio: 'pipe' },
    );
    listener.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
    });
    listenerExited = new Promise((resolve) => listener.once('exit', (code) => resolve(code)));
    output = new Output(listener);
    await output.waitFor(/Ready: waiting for events/, 'the listener to be ready', listenerExited);
    receiverUrl = output.text.match(/parley listen: (https:\/\/127\.0\.0\.1:\d+\/parley-webhook)/)?.[1] ?? '';
  });
  after(async () => {
    if (listener.exitCode === null) listener.kill('SIGTERM');
    await listenerExited;
    await parley.stop();
  });

  it('keeps its local CA in DATA_DIR (key mode 0600) and is a CA certificate', () => {
    assert.equal(caPath, join(dataDir, 'listen-ca.pem'));
    assert.equal(statSync(join(dataDir, 'listen-ca-key.pem')).mode & 0o777, 0o600);
    const ca = new X509Certificate(readFileSync(caPath));
    assert.equal(ca.ca, true);
  });

  it('sets itself as the webhook with the HMAC key, and prints a sandbox message verified (one JSON line)', async () => {
    assert.match(receiverUrl, /^https:\/\/127\.0\.0\.1:\d+\/parley-webhook$/);
    const webhook = await api(parley, 'GET', '/v1/webhook');
    assert.equal(webhook.data.webhook, receiverUrl);
    assert.deepEqual((await api(parley, 'GET', '/v1/session/hmac/config')).data, { configured: true });

    assert.equal((await api(parley, 'POST', '/v1/session/connect')).code, 200);
    assert.equal((await api(parley, 'POST', '/v1/sandbox/scan', { phone: '5511999990001' })).code, 200);
    const inbound = await api(parley, 'POST', '/v1/sandbox/inbound', {
      phone: '5511988887777',
      body: 'Hi! Is the shop open?',
      pushName: 'Ana',
    });
    const messageId = inbound.data.id;
    assert.match(messageId, /^[0-9A-F]{32}$/);

    await output.waitFor(new RegExp(`"id":"${messageId}"`), 'the Message event line', listenerExited);
    const lines = stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const line = lines.find((l) => l.payload?.event?.info?.id === messageId);
    assert.ok(line, stdout);
    assert.deepEqual(Object.keys(line), ['verified', 'webhookId', 'webhookTimestamp', 'payload']);
    assert.equal(line.verified, true);
    assert.match(line.webhookId, /^[0-9a-f-]{36}$/);
    assert.equal(line.payload.type, 'Message');
    assert.equal(line.payload.event.message.conversation, 'Hi! Is the shop open?');
    assert.equal(line.payload.event.info.messageSource.sender, '5511988887777@s.whatsapp.net');
    assert.ok(
      lines.every((l) => l.verified === true),
      'every delivery verified',
    );

    // parley's delivery log agrees: delivered, answered 204 by the listener (recorded just after the answer)
    let entry: any;
    const deadline = Date.now() + 10_000;
    while (entry?.status !== 'delivered' && Date.now() < deadline) {
      const log = await api(parley, 'GET', '/v1/webhook/deliveries?limit=100');
      entry = log.data.deliveries.find((d: any) => d.id === line.webhookId);
      if (entry?.status !== 'delivered') await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(entry?.status, 'delivered', JSON.stringify(entry));
    assert.equal(entry.attempts.at(-1).statusCode, 204);
  });

  it('refuses (401) and prints a request whose signature does not match', async () => {
    const body = '{"type":"Message","event":{},"instanceId":"x","sequence":99}';
    const timestamp = String(Math.floor(Date.now() / 1000));
    const wrongKey = 'not-the-listener-key-0123456789abcdef';
    const status = await postToListener(receiverUrl, readFileSync(caPath, 'utf8'), body, {
      'webhook-id': 'forged-1',
      'webhook-timestamp': timestamp,
      'x-hmac-signature': createHmac('sha256', wrongKey).update(body).digest('hex'),
      'webhook-signature': `v1,${createHmac('sha256', HMAC_KEY).update(`forged-1.${timestamp}.${body}x`).digest('base64')}`,
    });
    assert.equal(status, 401);
    await output.waitFor(/"webhookId":"forged-1"/, 'the refused line', listenerExited);
    const line = stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .find((l) => l.webhookId === 'forged-1');
    assert.deepEqual(line, {
      verified: false,
      error: 'x-hmac-signature does not match the body; webhook-signature does not match the body',
      webhookId: 'forged-1',
      webhookTimestamp: Number(timestamp),
      payload: JSON.parse(body),
    });
  });

  it('on SIGTERM removes the webhook it set and exits 0', async () => {
    listener.kill('SIGTERM');
    assert.equal(await listenerExited, 0);
    assert.match(output.text, /webhook removed/);
    assert.equal((await api(parley, 'GET', '/v1/webhook')).data.webhook, '');
  });

  it('refuses a live key (it would replace a real webhook and HMAC key; docs/decisions/0033-listen-reads-the-stream.md)', () => {
    const run = spawnSync(
      process.execPath,
      ['bin/parley.js', 'listen', '--webhook', '--url', parley.url, '--key', `svc_live_${'a'.repeat(38)}`],
      { cwd: ROOT, env: parley.env, encoding: 'utf8' },
    );
    assert.equal(run.status, 1);
    assert.match(run.stderr, /parley listen --webhook takes a test key \(svc_test_…\)/);
  });
});

describe('parley listen --webhook against a parley without the development settings', () => {
  let parley: ParleyProcess;
  before(async () => {
    parley = await startParley({}, mkdtempSync(join(tmpdir(), 'parley-listen-plain-')));
  });
  after(() => parley.stop());

  it('exits 1 naming the settings parley needs, and leaves the webhook and the HMAC key as they were', async () => {
    const run = spawnSync(
      process.execPath,
      ['bin/parley.js', 'listen', '--webhook', '--url', parley.url, '--key', parley.key],
      {
        cwd: ROOT,
        env: parley.env,
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    assert.equal(run.status, 1, run.stderr);
    assert.match(
      run.stderr,
      /^parley: POST \/v1\/webhook answered 400: webhookUrl is refused: .*\. parley delivers to this receiver only when started with WEBHOOK_ALLOWED_CIDRS=127\.0\.0\.1\/32 OUTBOUND_CA_FILE=\S+listen-ca\.pem \(settings for a development server/m,
    );
    const [webhook, hmac] = await Promise.all([
      api(parley, 'GET', '/v1/webhook'),
      api(parley, 'GET', '/v1/session/hmac/config'),
    ]);
    assert.equal(webhook.data.webhook, '');
    assert.equal(hmac.data.configured, false, 'the instance HMAC key was not replaced');
  });
});
