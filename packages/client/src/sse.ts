/**
 * The parser of server-sent events bodies (WHATWG HTML §9.2.6) that `client.events()` reads the event stream with
 * (./stream.ts, docs/decisions/0034-client-stream-transport.md), and that `parley listen` reads it with too
 * (src/cli/listen-stream.ts, docs/decisions/0033-listen-reads-the-stream.md): one implementation. It imports nothing,
 * so the server's build compiles this one file beside its own (scripts/build.js) without the rest of the package.
 */

/** One event of a server-sent events body (WHATWG HTML §9.2.6): its name (default `message`) and its data. */
export interface ServerSentEvent {
  /** The `event` field; `message` when absent. */
  event: string;
  /** The `data` lines, joined by newlines. */
  data: string;
  /** The `id` field, or undefined when absent. */
  id: string | undefined;
}

/**
 * The events of a server-sent events body as they arrive (WHATWG HTML §9.2.6); comment lines (`: heartbeat`) are
 * dropped, each calling `onComment`, and every chunk read calls `onData` (what the idle timeout watches). A line ends
 * at CR LF, LF or CR, a CR LF split between two chunks being one end of line. Returns when the body ends (an event
 * not ended by an empty line is dropped, as the standard says).
 * @throws what reading the body throws (the connection broke, the request was aborted).
 */
export async function* serverSentEvents(
  body: ReadableStream<Uint8Array>,
  onData: () => void = () => {},
  onComment: () => void = () => {},
): AsyncGenerator<ServerSentEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let event = '';
  let id: string | undefined;
  let data: string[] = [];
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) buffer += decoder.decode();
      else {
        onData();
        buffer += decoder.decode(value, { stream: true });
      }
      for (;;) {
        const end = buffer.search(/\r\n|\r|\n/);
        if (end < 0) break;
        // A CR ending what has come may be the first half of a CR LF split between chunks, one end of line: the
        // next chunk says. When the body has ended, it is a line end of its own.
        if (!done && end === buffer.length - 1 && buffer[end] === '\r') break;
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + (buffer.startsWith('\r\n', end) ? 2 : 1));
        if (line === '') {
          if (data.length > 0) yield { event: event === '' ? 'message' : event, data: data.join('\n'), id };
          event = '';
          id = undefined;
          data = [];
          continue;
        }
        if (line.startsWith(':')) {
          onComment();
          continue;
        }
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event = text;
        else if (field === 'data') data.push(text);
        else if (field === 'id') id = text;
      }
      if (done) return;
    }
  } finally {
    // Stops the download when the consumer leaves early (an abort, a `break`).
    await reader.cancel().catch(() => undefined);
  }
}
