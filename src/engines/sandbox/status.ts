import { DomainError, errors } from '../../domain/errors.ts';
import {
  type EngineMessage,
  type Jid,
  type OutgoingMessage,
  phoneOfJid,
  type SentMessage,
  STATUS_BROADCAST,
  userJid,
} from '../../domain/messages.ts';
import { contentOf } from '../../domain/sends.ts';
import type { AuthEntry, SandboxReceiptInput } from '../engine.ts';
import type { SandboxAccount, SandboxCredentials } from './account.ts';
import { isBlocked } from './profile.ts';

/**
 * Status updates (stories) on the simulated platform (docs/decisions/0044-status-stories.md): a message to
 * `status@broadcast` is shown to the users of its `statusJidList` that are registered and that the account did not
 * block (as the platform finds no devices for the others). Each status the account posted is kept in the session's
 * auth port (category `sandbox-status`, id = the message id) with who received it and who viewed it, so a test or
 * the sandbox's receipt helper can see what each simulated contact saw; it survives restarts, as the platform keeps
 * a status for its day.
 */

const CATEGORY = 'sandbox-status';

/** What a simulated contact's phone shows of a status. */
export interface SandboxStatus {
  id: string;
  /** The posting account's phone number. */
  from: string;
  kind: 'text' | 'image' | 'video';
  /** The text, or the media's caption. */
  text?: string;
  mimetype?: string;
  /** Text statuses: 0xAARRGGBB and WhatsApp's font number, when set. */
  backgroundArgb?: number;
  font?: number;
  /** Epoch ms. */
  timestamp: number;
  /** Phone numbers the status reached, in the order of the audience. */
  recipients: string[];
  /** Phone numbers that viewed it (a `read` receipt), with the receipt state, by phone. */
  views: Record<string, 'delivered' | 'read' | 'played'>;
}

async function readStatus(account: SandboxAccount, id: string): Promise<SandboxStatus | undefined> {
  const value = (await account.context.auth.get(CATEGORY, [id])).get(id);
  return value === undefined ? undefined : (JSON.parse(value) as SandboxStatus);
}

async function writeStatus(account: SandboxAccount, status: SandboxStatus): Promise<void> {
  await account.context.auth.set([statusEntry(status)]);
}

/** The entry storing `status` (its recipients and views). */
function statusEntry(status: SandboxStatus): AuthEntry {
  return { category: CATEGORY, id: status.id, value: JSON.stringify(status) };
}

/**
 * Posts a status (`message.to` = `status@broadcast`): keeps it with the recipients it reached and records the
 * account's own `message` event (chat `status@broadcast`), awaited as every send is. Resolves with the id and time.
 * @throws DomainError invalid when the content is not a text, an image or a video.
 */
export async function postStatus(
  account: SandboxAccount,
  creds: SandboxCredentials,
  message: OutgoingMessage,
  id: string,
): Promise<SentMessage> {
  const { content } = message;
  if (content.kind !== 'text' && content.kind !== 'image' && content.kind !== 'video') {
    throw errors.badRequest('a status is a text, an image or a video');
  }
  const recipients: string[] = [];
  for (const jid of message.statusJidList ?? []) {
    const phone = phoneOfJid(jid);
    if (phone === null || phone === creds.phone || recipients.includes(phone)) continue;
    if (!(await account.world.user(phone)).registered) continue;
    if (await isBlocked(account, creds, phone)) continue;
    recipients.push(phone);
  }
  const stored = contentOf(content);
  const timestamp = account.context.clock();
  await writeStatus(account, {
    id,
    from: creds.phone,
    kind: content.kind,
    ...(stored.text === undefined ? {} : { text: stored.text }),
    ...(stored.mimetype === undefined ? {} : { mimetype: stored.mimetype }),
    ...(content.kind === 'text' && content.backgroundArgb !== undefined
      ? { backgroundArgb: content.backgroundArgb }
      : {}),
    ...(content.kind === 'text' && content.font !== undefined ? { font: content.font } : {}),
    timestamp,
    recipients,
    views: {},
  });
  const own: EngineMessage = {
    id,
    source: { chat: STATUS_BROADCAST, sender: userJid(creds.phone), isFromMe: true, isGroup: false },
    pushName: creds.pushName,
    timestamp,
    content: stored,
  };
  await account.context.emit({ type: 'message', message: own });
  return { id, timestamp };
}

/**
 * The receipt helper for a status (docs/decisions/0004-sandbox.md): contact `input.phone` (by default the first
 * recipient) views (`read`), plays or gets status `status` → a `receipt` event from that contact in chat
 * `status@broadcast`, as the platform reports a status view to its poster.
 * @throws DomainError not_participant when the contact did not receive the status (`phone <phone> did not receive
 *   the status`), or no contact is named and the status reached none (`the status reached no contact`).
 */
export async function statusReceipt(
  account: SandboxAccount,
  status: EngineMessage,
  input: SandboxReceiptInput,
): Promise<void> {
  const kept = await readStatus(account, status.id);
  const phone = input.phone ?? kept?.recipients[0];
  if (phone === undefined) throw new DomainError('not_participant', 'the status reached no contact');
  if (!kept?.recipients.includes(phone)) {
    throw new DomainError('not_participant', `phone ${phone} did not receive the status`);
  }
  kept.views[phone] = input.state;
  const viewer: Jid = userJid(phone);
  // The view kept with its receipt (docs/decisions/0077-state-with-its-events.md).
  await account.context.emitWith(
    [statusEntry(kept)],
    [
      {
        type: 'receipt',
        state: input.state,
        messageIds: [status.id],
        source: { chat: STATUS_BROADCAST, sender: viewer, isFromMe: false, isGroup: false },
        timestamp: account.context.clock(),
      },
    ],
  );
}

/** Every status the account posted, oldest first; with `phone`, only those that reached that contact. */
export async function statuses(account: SandboxAccount, phone?: string): Promise<SandboxStatus[]> {
  const all = [...(await account.context.auth.list(CATEGORY)).values()].map(
    (value) => JSON.parse(value) as SandboxStatus,
  );
  return all
    .filter((status) => phone === undefined || status.recipients.includes(phone))
    .sort((a, b) => a.timestamp - b.timestamp || a.id.localeCompare(b.id));
}
