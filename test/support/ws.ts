import type { IncomingHttpHeaders } from 'node:http';
import WebSocket from 'ws';

/** An open WebSocket client whose text frames are queued for {@link WsClient.next}. */
export interface WsClient {
  socket: WebSocket;
  /** Headers of the server's 101 answer. */
  headers: IncomingHttpHeaders;
  /** The next text frame not taken yet, waiting for it. @throws when the connection closes first. */
  next(): Promise<string>;
  /** Frames received and not taken yet. */
  pending(): string[];
  /** Resolves with the close code and reason once the connection closed. */
  closed: Promise<{ code: number; reason: string }>;
}

/**
 * Opens a WebSocket to `url` (ws://…) with `headers` (a server-side client can set `Authorization`); resolves once
 * open. @throws when the server refuses the upgrade (see {@link wsRefusal}).
 */
export function openWs(url: string, headers: Record<string, string>): Promise<WsClient> {
  const socket = new WebSocket(url, { headers });
  const frames: string[] = [];
  let wake: (() => void) | undefined;
  let isClosed = false;
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    socket.once('close', (code, reason) => {
      isClosed = true;
      wake?.();
      resolve({ code, reason: reason.toString() });
    });
  });
  socket.on('message', (data, isBinary) => {
    if (!isBinary) frames.push(data.toString());
    wake?.();
  });
  return new Promise((resolve, reject) => {
    socket.once('error', reject);
    socket.once('upgrade', (response) => {
      socket.off('error', reject);
      // Errors after the upgrade show as the close.
      socket.on('error', () => undefined);
      resolve({
        socket,
        headers: response.headers,
        closed,
        pending: () => [...frames],
        async next() {
          for (;;) {
            const frame = frames.shift();
            if (frame !== undefined) return frame;
            if (isClosed) throw new Error('the WebSocket closed before a further frame');
            await new Promise<void>((r) => {
              wake = r;
            });
            wake = undefined;
          }
        },
      });
    });
  });
}

/**
 * The answer of a WebSocket upgrade to `url` that the server refuses: its status and JSON body.
 * @throws when the server accepts the upgrade.
 */
export function wsRefusal(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: any }> {
  const socket = new WebSocket(url, { headers });
  return new Promise((resolve, reject) => {
    socket.once('unexpected-response', (_request, response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        socket.terminate();
        resolve({ status: response.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString()) });
      });
    });
    socket.once('open', () => {
      socket.close();
      reject(new Error(`${url} accepted the upgrade`));
    });
    socket.once('error', reject);
  });
}
