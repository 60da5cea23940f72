import { jidNormalizedUser } from 'baileys';
import { type LidMapping, lidJid, lidOfJid } from '../../domain/lids.ts';
import { phoneOfJid, userJid } from '../../domain/messages.ts';
import { toPhoneJid } from './jid.ts';
import type { IncomingQueue } from './listeners.ts';
import type { SocketLike } from './socket.ts';

/**
 * Pairs the live engine learns (docs/decisions/0038-lid-mappings.md): Baileys' `lid-mapping.update`, the alternate
 * fields of LID-addressed stanzas (`remoteJidAlt`, `participantAlt`), history syncs, the socket's mapping store —
 * everything the JID resolver is told (jid.ts). They are gathered while the session's serial queue is busy and
 * recorded as one `lid-mapping` event: by the queue's next task, or before it when the queue records another event
 * first ({@link LearnedLids.recordPending}, run by `IncomingQueue.record`), so an incoming event that taught a pair,
 * and named the user by phone JID with it, is recorded right after the pair, once the LID's chat moved.
 */
export class LearnedLids {
  readonly #queue: IncomingQueue;
  /** Told the pairs of a `lid-mapping` event that was not recorded (the resolver tells them again, jid.ts). */
  readonly #unrecorded: (mappings: readonly LidMapping[]) => void;
  /** Pairs not yet handed to the queue: LID digits → phone digits. */
  readonly #pending = new Map<string, string>();

  /** Records on `queue`; `unrecorded` is told the pairs of each event whose recording failed. */
  constructor(queue: IncomingQueue, unrecorded: (mappings: readonly LidMapping[]) => void = () => undefined) {
    this.#queue = queue;
    this.#unrecorded = unrecorded;
  }

  /** Adds a pair; the first pair of a batch schedules the batch's recording on the queue. */
  add(mapping: LidMapping): void {
    const first = this.#pending.size === 0;
    this.#pending.set(mapping.lid, mapping.phone);
    if (!first) return;
    this.#queue.enqueue(() => this.recordPending(), 'lid-mapping');
  }

  /**
   * Records the pairs added and not recorded yet as one `lid-mapping` event, now; nothing when there are none. Never
   * rejects: the pairs of an event that was not recorded are told to `unrecorded`.
   */
  async recordPending(): Promise<void> {
    const mappings = [...this.#pending].map(([lid, phone]) => ({ lid, phone }));
    this.#pending.clear();
    if (mappings.length === 0) return;
    if (!(await this.#queue.record({ type: 'lid-mapping', mappings }))) this.#unrecorded(mappings);
  }
}

/**
 * Asks Baileys' LID mapping store (`signalRepository.lidMapping`, Baileys Signal/lid-mapping.js) for the pair of
 * LID `lid` or phone `phone` (digits only): `getPNForLID` reads its cache and the stored `lid-mapping` keys;
 * `getLIDForPN` also runs a usync `lid` query to the platform when neither knows the number. Null when nothing
 * knows it or the answer is not a user JID.
 * @throws the socket's error when the platform query fails.
 */
export async function lookupLidMapping(
  sock: SocketLike,
  query: { lid: string } | { phone: string },
): Promise<LidMapping | null> {
  const repository = sock.signalRepository.lidMapping;
  if ('lid' in query) {
    const pn = await repository.getPNForLID(lidJid(query.lid));
    const phoneJid = pn ? toPhoneJid(pn) : null;
    const phone = phoneJid ? phoneOfJid(phoneJid) : null;
    return phone === null ? null : { lid: query.lid, phone };
  }
  const lid = await repository.getLIDForPN(userJid(query.phone));
  const digits = lid ? lidOfJid(jidNormalizedUser(lid)) : null;
  return digits === null ? null : { lid: digits, phone: query.phone };
}
