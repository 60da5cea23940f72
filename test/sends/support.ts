import { encodeSendPayload } from '../../src/sends/payload.ts';
import type { NewSendJob } from '../../src/store/send-jobs.ts';

/** The chat the send queue tests send to. */
const CHAT = '5511977776666@s.whatsapp.net';

let seq = 0;

/**
 * A new text job of instance `instanceId` to {@link CHAT}, its text its id, accepted at `now` (epoch ms): synchronous
 * with one attempt, or queued with 25. Each gets the next `seq` of this test process.
 */
export function textJob(instanceId: string, id: string, mode: 'sync' | 'async', now: number): NewSendJob {
  seq += 1;
  return {
    instanceId,
    id,
    seq,
    chat: CHAT,
    kind: 'text',
    payload: encodeSendPayload({ to: CHAT, content: { kind: 'text', text: id, linkPreview: false } }),
    mode,
    runAt: now,
    sendAt: null,
    maxAttempts: mode === 'sync' ? 1 : 25,
    now,
  };
}
