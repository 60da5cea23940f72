import type { GroupMetadata } from 'baileys';
import type { GroupInfo, GroupParticipant, Jid } from '../../domain/messages.ts';
import type { BoundedCache } from './cache.ts';
import type { MappingContext } from './incoming.ts';
import type { JidResolver } from './jid.ts';

/**
 * Teaches `resolver` every LID↔phone pair group metadata `meta` carries (docs/decisions/0038-lid-mappings.md,
 * docs/decisions/0025-live-engine.md): a LID-addressed group's participants with their `phone_number` attribute
 * (Baileys' `phoneNumber`), a phone-addressed group's with their `lid`, and the owner's and the subject setter's and
 * the description setter's and the author's phone fields (`ownerPn`, `subjectOwnerPn`, `descOwnerPn`, `authorPn`).
 * Partial metadata (a `groups.update`) teaches what it carries. Each pair new to the resolver is recorded as a
 * `lid-mapping` event (jid.ts `onLearned`), so a member's later receipts and messages, which the platform may name
 * by LID alone, resolve to the phone JID.
 */
export function learnGroupPairs(meta: Partial<GroupMetadata>, resolver: JidResolver): void {
  for (const p of meta.participants ?? []) {
    if (p.id && p.lid) resolver.remember(p.lid, p.id);
    if (p.id && p.phoneNumber) resolver.remember(p.id, p.phoneNumber);
  }
  const pairs: [string | undefined, string | undefined][] = [
    [meta.owner, meta.ownerPn],
    [meta.subjectOwner, meta.subjectOwnerPn],
    [meta.descOwner, meta.descOwnerPn],
    [meta.author, meta.authorPn],
  ];
  for (const [jid, pn] of pairs) if (jid && pn) resolver.remember(jid, pn);
}

/**
 * Keeps group metadata `meta` in the session's group cache (Baileys' `cachedGroupMetadata`, so a send to the group
 * needs no fetch while it is fresh) and teaches `resolver` its pairs ({@link learnGroupPairs}): every metadata parley
 * or Baileys fetches goes through here (docs/decisions/0038-lid-mappings.md).
 */
export function keepGroup(meta: GroupMetadata, groups: BoundedCache, resolver: JidResolver): void {
  groups.set(meta.id, meta);
  learnGroupPairs(meta, resolver);
}

/**
 * A group as docs/api.md#groups shows it (times epoch ms, `disappearingTimer` seconds) from Baileys' `GroupMetadata`
 * (what `extractGroupMetadata` parses from the `w:g2` answer). Every participant and owner JID is a phone JID:
 * LID-addressed groups carry the phone number per participant (`phoneNumber`, from the `phone_number`
 * attribute) and the owner's in `ownerPn`; the rest goes through the resolver (docs/decisions/0025-live-engine.md).
 * `isLocked` is the group's `locked` flag (only admins edit the info), `isAnnounce` its `announcement` flag.
 */
export async function toGroupInfo(meta: GroupMetadata, ctx: MappingContext): Promise<GroupInfo> {
  const resolve = async (jid: string | undefined, alt?: string | null): Promise<Jid> =>
    jid ? (await ctx.resolver.resolve(jid, alt)).jid : '';
  const participants: GroupParticipant[] = [];
  for (const p of meta.participants) {
    if (p.lid && p.id) ctx.resolver.remember(p.lid, p.id);
    const jid = await resolve(p.id, p.phoneNumber);
    const isSuperAdmin = p.admin === 'superadmin' || p.isSuperAdmin === true;
    const isAdmin = isSuperAdmin || p.admin === 'admin' || p.isAdmin === true;
    participants.push({ jid, isAdmin, isSuperAdmin });
  }
  const seconds = (s: number | undefined) => (s && Number.isFinite(s) ? s * 1000 : 0);
  const disappearingTimer = meta.ephemeralDuration ?? 0;
  return {
    jid: meta.id,
    name: meta.subject ?? '',
    topic: meta.desc ?? '',
    ownerJid: await resolve(meta.owner, meta.ownerPn),
    created: seconds(meta.creation),
    nameSetAt: seconds(meta.subjectTime),
    nameSetBy: await resolve(meta.subjectOwner, meta.subjectOwnerPn),
    isAnnounce: Boolean(meta.announce),
    isLocked: Boolean(meta.restrict),
    isEphemeral: disappearingTimer > 0,
    disappearingTimer,
    participants,
  };
}

/** True when the account (phone JID or LID, any device) is an admin of the group described by `meta`. */
export function isAdminOf(meta: GroupMetadata, me: { phoneJid: Jid | null; lid: string | null }): boolean {
  const user = (jid: string | null | undefined) => jid?.split('@')[0]?.split(':')[0];
  const mine = new Set([user(me.phoneJid), user(me.lid)].filter((u): u is string => Boolean(u)));
  return meta.participants.some((p) => {
    const ids = [user(p.id), user(p.phoneNumber), user(p.lid)];
    return (
      ids.some((u) => u !== undefined && mine.has(u)) && (p.admin === 'admin' || p.admin === 'superadmin')
    );
  });
}
