import type { RegistrationCache } from '../contacts/registration-cache.ts';
import { DomainError } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import { isLidAddress } from '../domain/lids.ts';
import { GROUP_DOMAIN, STATUS_BROADCAST } from '../domain/messages.ts';
import type { EngineSession } from '../engines/engine.ts';

/**
 * Checks that the recipient of a one-to-one chat (`address`, a `phone` field) is registered on the platform, through
 * the registration cache (docs/decisions/0001-envelope-and-error-codes.md): a number the cache knows costs no
 * platform round trip. Sends, reactions, read receipts and chat presence check it alike, whichever engine serves the
 * instance (docs/api.md#post-v1messagesread, docs/api.md#post-v1chatspresence). Group chats are checked by the engine
 * (membership), and so are `<lid>@lid` addresses (a LID has no phone number to check;
 * docs/decisions/0038-lid-mappings.md). A status's audience is not checked: the platform shows it to the users it
 * has devices for (docs/decisions/0044-status-stories.md).
 * @throws DomainError not_registered `recipient <phone> is not registered on the platform` (422); the engine's errors
 *   when the cache must ask the platform.
 */
export async function requireRegistered(
  registrations: RegistrationCache,
  instance: Instance,
  session: EngineSession,
  address: string,
): Promise<void> {
  if (address.endsWith(`@${GROUP_DOMAIN}`) || isLidAddress(address) || address === STATUS_BROADCAST) return;
  const [check] = await registrations.check(instance.id, [address], (phones) => session.checkPhones(phones));
  if (!check?.isInPlatform) {
    throw new DomainError('not_registered', `recipient ${address} is not registered on the platform`);
  }
}
