/** One server-sent event: its name, its parsed data, the data as sent and its `id` line when it has one. */
export interface Sse {
  event: string;
  data: any;
  text: string | undefined;
  id: string | undefined;
}

/**
 * Reads a text/event-stream body from fetch (WHATWG HTML: `event:` and `data:` lines, a blank line ends one).
 * `next(name, accept?)` takes the first event of that name (whose data `accept` allows) not taken yet; events of
 * other names stay for their own `next`; `next()` without a name takes the first event not taken yet. `ended()` resolves when the stream ends, cleanly or cut (a browser's
 * EventSource reconnects either way); events still arriving are dropped.
 * @throws from `next` when the stream ends before such an event.
 */
export function sseReader(body: ReadableStream<Uint8Array>) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const events: Sse[] = [];
  let buffer = '';
  return {
    async next(name?: string, accept: (data: any) => boolean = () => true): Promise<Sse> {
      for (;;) {
        const index = events.findIndex((e) => (name === undefined || e.event === name) && accept(e.data));
        if (index >= 0) return events.splice(index, 1)[0] as Sse;
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended before a ${name ?? 'further'} event`);
        buffer += decoder.decode(value, { stream: true });
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          const id = /^id: (.*)$/m.exec(block)?.[1];
          if (event !== undefined)
            events.push({ event, data: data === undefined ? undefined : JSON.parse(data), text: data, id });
        }
      }
    },
    async ended(): Promise<void> {
      try {
        for (;;) {
          const { done } = await reader.read();
          if (done) return;
        }
      } catch {
        // Cut: the connection closed mid-stream.
      }
    },
    cancel: () => reader.cancel(),
  };
}
