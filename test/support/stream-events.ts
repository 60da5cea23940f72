import type { EngineEvent, MessageSource } from '../../src/domain/messages.ts';
import type { TestApp } from './app.ts';

/** The peer every event of {@link streamEvents} comes from. */
export const STREAM_PEER = '5511988887777';

/** An enterprise plan generous enough that a stream test never meets a rate limit. */
export const ENTERPRISE = { plan: 'enterprise', perMinute: 100_000, perDay: 1_000_000 } as const;

/**
 * Numbered engine events for the stream tests (the CLI's `listen`, the client's `events()`): `message(n)` is an
 * inbound text from {@link STREAM_PEER} and `receipt(n)` its read receipt. `idPrefix` (six hex characters) keeps
 * one file's message ids apart from another's.
 */
export function streamEvents(idPrefix: string): {
  message: (n: number) => EngineEvent;
  receipt: (n: number) => EngineEvent;
} {
  const jid = `${STREAM_PEER}@s.whatsapp.net`;
  const source: MessageSource = { chat: jid, sender: jid, isFromMe: false, isGroup: false };
  const id = (n: number) => `${idPrefix}${String(n).padStart(16, '0')}`;
  const at = Date.UTC(2026, 0, 15, 12, 0, 0);
  return {
    message: (n) => ({
      type: 'message',
      message: {
        id: id(n),
        source,
        pushName: 'Ana',
        timestamp: at,
        content: { kind: 'text', text: `message ${n}` },
      },
    }),
    receipt: (n) => ({ type: 'receipt', state: 'read', messageIds: [id(n)], source, timestamp: at }),
  };
}

/** Whether exactly `count` event streams of `t` listen for commits (0: every stream closed and unsubscribed). */
export function listenersIdle(t: TestApp, count = 0): boolean {
  return t.services.commits.listeners === count;
}
