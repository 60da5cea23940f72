import { isPnUser, jidNormalizedUser } from 'baileys';
import type { Jid } from '../../domain/messages.ts';
import type { SocketLike } from './socket.ts';

/**
 * The address a 1:1 message to `to` is relayed to: the user's LID (`<lid>@lid`) when Baileys' LID mapping knows
 * it (`signalRepository.lidMapping.getLIDForPN`, Baileys Signal/lid-mapping.js: its cache, the stored
 * `lid-mapping` keys, else one usync `lid` query — the same lookup Baileys' relayMessage already makes for every
 * 1:1 send to a phone JID, messages-send.js resolveTcTokenJid), else `to` unchanged. Groups, LIDs and other
 * non-phone JIDs are returned as they are.
 *
 * Why: Baileys 7 keys Signal sessions by LID. Relayed to a phone JID, a send with a cold device cache runs a usync
 * that returns the LID, and Baileys then force-refreshes the session of every LID it learns that way
 * (messages-send.js getUSyncDevices → `assertSessions(lids, true)`): it fetches a new pre-key bundle and starts
 * a new session even when the user's own first message set one up, and the user's phone drops the session it
 * had. Relayed to the LID, the usync carries no new mapping and the existing session is reused. Payloads and
 * stored messages keep the phone JID; only the relay address changes.
 *
 * A lookup that fails is logged by the caller's `onError` and the phone JID is used (Baileys resolves it itself
 * then, as before).
 */
export async function relayAddress(
  sock: SocketLike,
  to: Jid,
  onError: (error: unknown) => void = () => undefined,
): Promise<Jid> {
  if (!isPnUser(to)) return to;
  try {
    const lid = await sock.signalRepository.lidMapping.getLIDForPN(jidNormalizedUser(to));
    return lid ? jidNormalizedUser(lid) : to;
  } catch (error) {
    onError(error);
    return to;
  }
}
