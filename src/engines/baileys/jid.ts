import {
  isHostedLidUser,
  isHostedPnUser,
  isLidUser,
  isPnUser,
  jidDecode,
  jidNormalizedUser,
  type LIDMapping,
} from 'baileys';
import { BoundedMap } from '../../domain/bounded-map.ts';
import type { LidMapping } from '../../domain/lids.ts';
import type { Jid } from '../../domain/messages.ts';
import { phoneOfJid, USER_DOMAIN } from '../../domain/messages.ts';

/**
 * The part of Baileys' `signalRepository.lidMapping` (Baileys 7 `LIDMappingStore`, persisted in the
 * `lid-mapping` key type) the resolver asks when a LID is not in its own memory.
 */
export interface LidLookup {
  /** The phone JID (possibly device-qualified) of a LID, or null when the platform never told us. */
  getPNForLID(lid: string): Promise<string | null>;
  /**
   * The pairs of the `lids` (LID JIDs) the store knows, each as `{ lid, pn }` with `lid` as asked, or null when it
   * knows none: one read of the store for them all (Baileys 7 `getPNsForLIDs`). Absent: each is asked alone.
   */
  getPNsForLIDs?(lids: string[]): Promise<{ lid: string; pn: string }[] | null>;
}

/**
 * A JID as it goes into a payload: a phone JID, or the LID passed as is with `resolved: false`
 * (docs/decisions/0025-live-engine.md).
 */
export interface ResolvedJid {
  jid: Jid;
  /** False only for a LID (`…@lid`) that no mapping could turn into a phone JID. */
  resolved: boolean;
}

/** Options of {@link JidResolver}. */
export interface JidResolverOptions {
  /** The current socket's LID mapping store; undefined while no socket is open. */
  lookup?: () => LidLookup | undefined;
  /**
   * How many LID→phone pairs stay in memory (least recently used dropped first): a whole number of at least 1;
   * default 10,000.
   */
  capacity?: number;
  /**
   * parley's kept pairs (`lid_mappings`, docs/decisions/0038-lid-mappings.md): the phone number (digits) of a LID
   * (digits), undefined when none is kept. Asked when memory and the socket's store do not know a LID, so a pair
   * parley stored before a restart or a hand-over still names its user by phone JID. Default: not asked.
   */
  kept?: (lid: string) => Promise<string | undefined>;
  /**
   * {@link kept} for many LIDs (digits) at once, one read of parley's store for them all: the phone number (digits)
   * of each LID it keeps a pair for, by LID. Asked by {@link JidResolver.resolveAll}; absent, {@link kept} is asked
   * for each LID.
   */
  keptMany?: (lids: readonly string[]) => Promise<ReadonlyMap<string, string>>;
  /**
   * How many LIDs that neither the socket's store nor {@link kept} knew stay remembered as unknown, so each costs one
   * store read per session rather than one per event: a whole number of at least 1; default 10,000. A LID leaves that
   * list when its pair is remembered.
   */
  unknownCapacity?: number;
  /** Told when the mapping store fails a lookup (the LID is then passed on as is); default: nothing. */
  onLookupError?: (error: unknown, lid: string) => void;
  /**
   * Told each pair the resolver did not hold yet (or held with another phone), digits only: the session records
   * it as a `lid-mapping` event (docs/decisions/0038-lid-mappings.md). Default: nothing.
   */
  onLearned?: (mapping: LidMapping) => void;
}

/**
 * Turns whatever addressing the platform used into phone JIDs (`<digits>@s.whatsapp.net`, no device part), the
 * only user JID form parley's payloads carry (docs/api.md#conventions, docs/decisions/0025-live-engine.md). Baileys 7
 * delivers LID-addressed stanzas (`…@lid`) with the phone JID in the key's alternate fields (`remoteJidAlt`,
 * `participantAlt`); history syncs and contact sync carry LID↔phone pairs; the rest is in the socket's
 * `lid-mapping` store. The in-memory map is bounded (LRU), so a long-running session does not grow without limit.
 */
export class JidResolver {
  readonly #pairs: BoundedMap<string, string>;
  /**
   * LIDs (digits) whose pair was told to `onLearned` and not recorded ({@link JidResolver.untold}): told again the
   * next time the pair is remembered. Only LIDs of held pairs: one goes when its pair is dropped.
   */
  readonly #untold = new Set<string>();
  readonly #lookup: () => LidLookup | undefined;
  readonly #kept: ((lid: string) => Promise<string | undefined>) | undefined;
  readonly #keptMany: ((lids: readonly string[]) => Promise<ReadonlyMap<string, string>>) | undefined;
  /**
   * LIDs (digits) {@link JidResolverOptions.kept} was asked and did not know: not asked again until remembered.
   * parley keeps only pairs its engine reported or looked up through the socket's store, which is asked first, so
   * while this session runs nothing adds a pair to it that this resolver is not told of.
   */
  readonly #unknown: BoundedMap<string, true>;
  readonly #onLookupError: (error: unknown, lid: string) => void;
  readonly #onLearned: (mapping: LidMapping) => void;

  /** @throws RangeError when `options.capacity` is not a whole number of at least 1. */
  constructor(options: JidResolverOptions = {}) {
    this.#pairs = new BoundedMap(options.capacity ?? 10_000, {
      onEvict: (lid) => this.#untold.delete(lid),
    });
    this.#lookup = options.lookup ?? (() => undefined);
    this.#kept = options.kept;
    this.#keptMany = options.keptMany;
    this.#unknown = new BoundedMap(options.unknownCapacity ?? 10_000);
    this.#onLookupError = options.onLookupError ?? (() => undefined);
    this.#onLearned = options.onLearned ?? (() => undefined);
  }

  /**
   * Records that `lid` is the phone JID `pn` (either argument order is accepted; invalid pairs are ignored). A pair
   * not held yet, or held but not recorded ({@link JidResolver.untold}), is told to `onLearned` unless `announce` is
   * false (the caller records it itself).
   */
  remember(lid: string, pn: string, announce = true): void {
    let lidJid = lid;
    let pnJid = pn;
    if (isLidLike(pn) && isPhoneLike(lid)) [lidJid, pnJid] = [pn, lid];
    if (!isLidLike(lidJid) || !isPhoneLike(pnJid)) return;
    const key = lidUser(lidJid);
    const value = toPhoneJid(pnJid);
    if (key === null || value === null) return;
    const held = this.#pairs.get(key);
    this.#pairs.set(key, value);
    this.#unknown.delete(key);
    const untold = this.#untold.delete(key);
    const phone = phoneOfJid(value);
    if (announce && (held !== value || untold) && phone !== null) this.#onLearned({ lid: key, phone });
  }

  /**
   * Told that the `lid-mapping` event of `mappings`, told to `onLearned`, was not recorded: each pair still held is
   * told again the next time it is remembered (docs/decisions/0024-engines-and-data-flow.md: a pair is taken as
   * told once its event is stored, so one whose recording failed is not dropped for the session's life). It stays
   * in memory meanwhile: JIDs still resolve with it.
   */
  untold(mappings: readonly LidMapping[]): void {
    for (const { lid, phone } of mappings) {
      if (this.#pairs.get(lid) === `${phone}@${USER_DOMAIN}`) this.#untold.add(lid);
    }
  }

  /** Records many pairs (a history sync's `lidPnMappings`, `lid-mapping.update`). */
  rememberAll(mappings: readonly LIDMapping[]): void {
    for (const { lid, pn } of mappings) this.remember(lid, pn);
  }

  /** Number of pairs held in memory (tests and metrics). */
  get size(): number {
    return this.#pairs.size;
  }

  /**
   * The payload form of `jid`. Group, broadcast and phone JIDs are normalised (device part dropped); a LID is
   * resolved from `alt` (the key's alternate field, remembered for later), then memory, then the socket's LID
   * store, then parley's kept pairs (`kept`); a LID nothing resolves comes back unchanged (device dropped) with
   * `resolved: false`.
   */
  async resolve(jid: string, alt?: string | null): Promise<ResolvedJid> {
    if (!isLidLike(jid)) return { jid: toPhoneJid(jid) ?? jidNormalizedUser(jid), resolved: true };
    const plainLid = jidNormalizedUser(jid);
    if (alt && isPhoneLike(alt)) {
      this.remember(jid, alt);
      return { jid: toPhoneJid(alt) ?? jidNormalizedUser(alt), resolved: true };
    }
    const key = lidUser(jid);
    const known = key === null ? undefined : this.#pairs.use(key);
    if (known !== undefined) return { jid: known, resolved: true };
    const lookup = this.#lookup();
    if (lookup) {
      try {
        const pn = await lookup.getPNForLID(plainLid);
        if (pn && isPhoneLike(pn)) {
          this.remember(plainLid, pn);
          return { jid: toPhoneJid(pn) ?? jidNormalizedUser(pn), resolved: true };
        }
      } catch (error) {
        // The store could not answer: reported, then the LID is passed on as is.
        this.#onLookupError(error, plainLid);
      }
    }
    const phone = key === null ? undefined : await this.#keptPhone(key, plainLid);
    if (phone !== undefined) return { jid: `${phone}@${USER_DOMAIN}`, resolved: true };
    return { jid: plainLid, resolved: false };
  }

  /**
   * {@link resolve} for many JIDs (no alternate field), in their order, with one read of each store for the LIDs
   * memory does not know: the socket's mapping store (`getPNsForLIDs`, when it has it), then parley's kept pairs
   * (`keptMany`, when given) for those it did not know either; each LID once, however many of `jids` name it. Answers
   * as {@link resolve} would, one JID after another (a pair found is remembered and told, a kept one only
   * remembered, a LID kept nowhere remembered as unknown; a store that fails is reported for each LID it was asked
   * and leaves them unresolved). Used where a list names many users (the contacts list,
   * docs/decisions/0038-lid-mappings.md): a read per LID cost one statement per contact.
   */
  async resolveAll(jids: readonly string[]): Promise<ResolvedJid[]> {
    const lookup = this.#lookup();
    /** The LIDs memory does not know, by their digits: their plain JID. */
    const asked = new Map<string, string>();
    for (const jid of jids) {
      const key = isLidLike(jid) ? lidUser(jid) : null;
      if (key !== null && !this.#pairs.has(key)) asked.set(key, jidNormalizedUser(jid));
    }
    /** The phone JID found for each LID asked, by its digits (kept here too: memory is bounded). */
    const found = new Map<string, string>();
    if (asked.size > 0 && lookup !== undefined) await this.#lookUpAll(lookup, asked, found);
    if (asked.size > found.size && this.#keptMany !== undefined) await this.#keptAll(asked, found);
    const resolved: ResolvedJid[] = [];
    for (const jid of jids) {
      const key = isLidLike(jid) ? lidUser(jid) : null;
      if (key === null) {
        resolved.push(await this.resolve(jid));
        continue;
      }
      const known = this.#pairs.use(key) ?? found.get(key);
      if (known !== undefined) {
        resolved.push({ jid: known, resolved: true });
        continue;
      }
      const plainLid = jidNormalizedUser(jid);
      // Without `keptMany`, parley's kept pairs are asked per LID, as resolve does (once: the answer is remembered).
      const phone = this.#keptMany === undefined ? await this.#keptPhone(key, plainLid) : undefined;
      resolved.push(
        phone === undefined
          ? { jid: plainLid, resolved: false }
          : { jid: `${phone}@${USER_DOMAIN}`, resolved: true },
      );
    }
    return resolved;
  }

  /**
   * Asks the socket's mapping store for the LIDs of `asked` (digits → plain JID), at once when it has a batch read,
   * else one after another: each pair found is remembered (and told) and put in `found` (digits → phone JID). A failed
   * read is reported for each LID it asked.
   */
  async #lookUpAll(
    lookup: LidLookup,
    asked: ReadonlyMap<string, string>,
    found: Map<string, string>,
  ): Promise<void> {
    const pns = new Map<string, string>();
    const plainLids = [...asked.values()];
    if (lookup.getPNsForLIDs) {
      try {
        for (const pair of (await lookup.getPNsForLIDs(plainLids)) ?? []) pns.set(pair.lid, pair.pn);
      } catch (error) {
        for (const plainLid of plainLids) this.#onLookupError(error, plainLid);
      }
    } else {
      for (const plainLid of plainLids) {
        try {
          const pn = await lookup.getPNForLID(plainLid);
          if (pn) pns.set(plainLid, pn);
        } catch (error) {
          this.#onLookupError(error, plainLid);
        }
      }
    }
    for (const [key, plainLid] of asked) {
      const pn = pns.get(plainLid);
      if (pn === undefined || !isPhoneLike(pn)) continue;
      this.remember(plainLid, pn);
      found.set(key, toPhoneJid(pn) ?? jidNormalizedUser(pn));
    }
  }

  /**
   * Asks parley's kept pairs (`keptMany`, one read) for the LIDs of `asked` not in `found` and not known to have none:
   * each pair kept is remembered without being told and put in `found`, each LID with none remembered as unknown. A
   * failed read is reported for each LID it asked, which stay unresolved.
   */
  async #keptAll(asked: ReadonlyMap<string, string>, found: Map<string, string>): Promise<void> {
    if (this.#keptMany === undefined) return;
    const lids = [...asked.keys()].filter((lid) => !found.has(lid) && !this.#unknown.has(lid));
    if (lids.length === 0) return;
    let phones: ReadonlyMap<string, string>;
    try {
      phones = await this.#keptMany(lids);
    } catch (error) {
      for (const lid of lids) this.#onLookupError(error, asked.get(lid) ?? `${lid}@lid`);
      return;
    }
    for (const lid of lids) {
      const phone = phones.get(lid);
      if (phone === undefined || !/^\d{1,20}$/.test(phone)) {
        this.#unknown.set(lid, true);
        continue;
      }
      this.remember(asked.get(lid) ?? `${lid}@lid`, `${phone}@${USER_DOMAIN}`, false);
      found.set(lid, `${phone}@${USER_DOMAIN}`);
    }
  }

  /**
   * The phone number parley keeps for LID `lid` (digits; `plainLid` its JID), remembered without being told again
   * (the pair is stored already); undefined when none is kept, the LID is known to have none, or the store failed
   * (reported to `onLookupError`).
   */
  async #keptPhone(lid: string, plainLid: string): Promise<string | undefined> {
    if (this.#kept === undefined || this.#unknown.has(lid)) return undefined;
    let phone: string | undefined;
    try {
      phone = await this.#kept(lid);
    } catch (error) {
      this.#onLookupError(error, plainLid);
      return undefined;
    }
    if (phone === undefined || !/^\d{1,20}$/.test(phone)) {
      this.#unknown.set(lid, true);
      return undefined;
    }
    this.remember(plainLid, `${phone}@${USER_DOMAIN}`, false);
    return phone;
  }
}

/** True for `…@lid` and `…@hosted.lid` JIDs. */
export function isLidLike(jid: string | null | undefined): boolean {
  return jid ? Boolean(isLidUser(jid) || isHostedLidUser(jid)) : false;
}

/** True for `…@s.whatsapp.net`, `…@c.us` and `…@hosted` (phone-number) JIDs. */
export function isPhoneLike(jid: string | null | undefined): boolean {
  if (!jid) return false;
  return Boolean(isPnUser(jid) || isHostedPnUser(jid) || jid.endsWith('@c.us'));
}

/** `123:4@s.whatsapp.net`, `123@c.us`, `123:99@hosted` → `123@s.whatsapp.net`; null when not a phone JID. */
export function toPhoneJid(jid: string): Jid | null {
  if (!isPhoneLike(jid)) return null;
  const user = jidDecode(jid)?.user;
  return user ? `${user}@${USER_DOMAIN}` : null;
}

function lidUser(jid: string): string | null {
  return jidDecode(jid)?.user ?? null;
}
