import {
  type Contact as BaileysContact,
  type BinaryNode,
  getBinaryNodeChild,
  isJidBroadcast,
  isJidGroup,
  isJidNewsletter,
  proto,
  S_WHATSAPP_NET,
  USyncQuery,
  USyncUser,
} from 'baileys';
import type { Avatar, Contact, UserCheck, UserInfo } from '../../domain/messages.ts';
import type { AuthStateStore } from '../engine.ts';
import type { MappingContext } from './incoming.ts';
import { isLidLike, isPhoneLike, toPhoneJid } from './jid.ts';
import type { SocketLike } from './socket.ts';

/**
 * Auth-store category holding the account's contacts (docs/decisions/0025-live-engine.md: contacts list from
 * history/contacts events).
 */
export const CONTACTS_CATEGORY = 'contacts';

/**
 * A platform contact (Baileys `Contact`, from `contacts.upsert`/`contacts.update` and history syncs) as the
 * contact list entry of docs/api.md#contacts: `fullName` = the name saved on the phone, `firstName` its first word
 * (Baileys only carries the full name), `pushName` = the name the user set, `businessName` = the verified business
 * name. Null for groups, broadcasts and newsletters. The JID is a phone JID when any mapping knows it
 * (docs/decisions/0025-live-engine.md).
 */
export async function toContact(
  input: Partial<BaileysContact>,
  ctx: MappingContext,
): Promise<Contact | null> {
  const id = input.id;
  if (!id || isJidGroup(id) || isJidBroadcast(id) || isJidNewsletter(id)) return null;
  if (!isLidLike(id) && !isPhoneLike(id)) return null;
  if (input.lid && input.phoneNumber) ctx.resolver.remember(input.lid, input.phoneNumber);
  const alt = isLidLike(id) ? input.phoneNumber : undefined;
  const { jid } = await ctx.resolver.resolve(id, alt);
  const fullName = input.name ?? '';
  return {
    jid,
    businessName: input.verifiedName ?? '',
    firstName: fullName.trim().split(/\s+/)[0] ?? '',
    fullName,
    pushName: input.notify ?? '',
  };
}

/**
 * The account's contacts, kept in the instance's sealed auth store (deleted with it on logout). Updates merge
 * field by field: a later event that only carries a push name keeps the saved name.
 */
export class ContactBook {
  readonly #store: AuthStateStore;

  constructor(store: AuthStateStore) {
    this.#store = store;
  }

  /**
   * Merges platform contacts into the book and returns the entries that changed, merged, in the order of their first
   * input. Partial inputs only overwrite the fields they carry. An entry equal to the stored one is neither written
   * nor returned: Baileys reports the sender's push name with every message it receives (`contacts.update`), and
   * an unchanged name is not news.
   */
  async merge(inputs: readonly Partial<BaileysContact>[], ctx: MappingContext): Promise<Contact[]> {
    const mapped: { contact: Contact; input: Partial<BaileysContact> }[] = [];
    for (const input of inputs) {
      const contact = await toContact(input, ctx);
      if (contact) mapped.push({ contact, input });
    }
    if (mapped.length === 0) return [];
    const stored = await this.#store.get(CONTACTS_CATEGORY, [...new Set(mapped.map((m) => m.contact.jid))]);
    const merged = new Map<string, Contact>();
    for (const { contact, input } of mapped) {
      const previousText = stored.get(contact.jid);
      const previous =
        merged.get(contact.jid) ?? (previousText ? (JSON.parse(previousText) as Contact) : undefined);
      const next: Contact = previous ? { ...previous } : contact;
      if (previous) {
        if (input.name !== undefined) {
          next.fullName = contact.fullName;
          next.firstName = contact.firstName;
        }
        if (input.notify !== undefined) next.pushName = contact.pushName;
        if (input.verifiedName !== undefined) next.businessName = contact.businessName;
      }
      merged.set(contact.jid, next);
    }
    const changed = [...merged.values()]
      .map((contact) => ({ contact, value: JSON.stringify(contact) }))
      .filter(({ contact, value }) => value !== stored.get(contact.jid));
    await this.#store.set(
      changed.map(({ contact, value }) => ({ category: CONTACTS_CATEGORY, id: contact.jid, value })),
    );
    return changed.map(({ contact }) => contact);
  }

  /**
   * Every stored contact, one per JID, ordered by JID. A contact stored under a LID (the platform named the user by
   * LID alone when it was written: a user whose number it keeps private) is named by the phone JID `ctx`'s resolver
   * knows for it now, and merged with the one stored under that phone JID (each name taken from the phone JID's entry
   * when it has one): a LID whose pair is known names nobody in the contacts list (docs/decisions/0038-lid-mappings.md).
   * The LIDs are resolved together (./jid.ts `JidResolver.resolveAll`): one read of the socket's mapping store and one
   * of parley's kept pairs for those memory does not know, whatever their number (before, one of each per contact).
   * @throws the store's error.
   */
  async list(ctx: MappingContext): Promise<Contact[]> {
    const all = await this.#store.list(CONTACTS_CATEGORY);
    const byJid = new Map<string, Contact>();
    const byLid: Contact[] = [];
    for (const text of all.values()) {
      const contact = JSON.parse(text) as Contact;
      if (isLidLike(contact.jid)) byLid.push(contact);
      else byJid.set(contact.jid, contact);
    }
    const names = await ctx.resolver.resolveAll(byLid.map((contact) => contact.jid));
    const renamed: Contact[] = [];
    byLid.forEach((contact, i) => {
      const named = names[i];
      if (named?.resolved) renamed.push({ ...contact, jid: named.jid });
      else byJid.set(contact.jid, contact);
    });
    for (const contact of renamed) {
      const kept = byJid.get(contact.jid);
      byJid.set(
        contact.jid,
        kept
          ? {
              jid: kept.jid,
              businessName: kept.businessName || contact.businessName,
              firstName: kept.firstName || contact.firstName,
              fullName: kept.fullName || contact.fullName,
              pushName: kept.pushName || contact.pushName,
            }
          : contact,
      );
    }
    return [...byJid.values()].sort((a, b) => a.jid.localeCompare(b.jid));
  }
}

/**
 * USync `contact` protocol that also returns what the platform matched the query to (Baileys' own parser keeps
 * only the boolean): `<contact type="in|out">+<digits></contact>`.
 */
export class ContactQueryProtocol {
  readonly name = 'contact';
  getQueryElement(): BinaryNode {
    return { tag: 'contact', attrs: {} };
  }
  getUserElement(user: USyncUser): BinaryNode | null {
    return { tag: 'contact', attrs: {}, content: user.phone ?? '' };
  }
  parser(node: BinaryNode): { registered: boolean; query: string } {
    const content = node.content;
    const text =
      typeof content === 'string'
        ? content
        : content instanceof Uint8Array
          ? Buffer.from(content).toString()
          : '';
    return { registered: node.attrs.type === 'in', query: text.replace(/\D/g, '') };
  }
}

/**
 * USync `business` protocol asking for the verified business name (WhatsApp Web and whatsmeow's `IsOnWhatsApp`
 * ask the same): the answer's `<verified_name>` holds a `VerifiedNameCertificate` whose details carry the name, as
 * in Baileys' `decryptMessageNode` for message stanzas. Returns '' when the user has none.
 */
export class BusinessQueryProtocol {
  readonly name = 'business';
  getQueryElement(): BinaryNode {
    return { tag: 'business', attrs: {}, content: [{ tag: 'verified_name', attrs: {} }] };
  }
  getUserElement(): BinaryNode | null {
    return null;
  }
  parser(node: BinaryNode): string {
    const cert = getBinaryNodeChild(node, 'verified_name')?.content;
    if (!(cert instanceof Uint8Array) || cert.length === 0) return '';
    try {
      const decoded = proto.VerifiedNameCertificate.decode(cert);
      if (!decoded.details) return '';
      return proto.VerifiedNameCertificate.Details.decode(decoded.details).verifiedName ?? '';
    } catch {
      return '';
    }
  }
}

interface UserRow {
  id: string;
  contact?: { registered: boolean; query: string } | null;
  business?: string | null;
  status?: { status: string | null } | null;
}

async function queryPhones(
  sock: SocketLike,
  phones: readonly string[],
  withStatus: boolean,
): Promise<Map<string, UserRow>> {
  const query = new USyncQuery().withContext('interactive').withMode('query');
  query.protocols.push(new ContactQueryProtocol(), new BusinessQueryProtocol());
  if (withStatus) query.withStatusProtocol();
  for (const phone of new Set(phones)) query.withUser(new USyncUser().withPhone(`+${phone}`));
  const result = await sock.executeUSyncQuery(query);
  const byPhone = new Map<string, UserRow>();
  for (const entry of result?.list ?? []) {
    const row = entry as unknown as UserRow;
    const jidPhone = toPhoneJid(row.id)?.split('@')[0];
    const query = row.contact?.query || jidPhone;
    if (query) byPhone.set(query, row);
    if (jidPhone && !byPhone.has(jidPhone)) byPhone.set(jidPhone, row);
  }
  return byPhone;
}

/**
 * Which phone numbers are registered (docs/api.md#contacts), one entry per number in input order, with the
 * verified business name ('' when none). One USync query (`contact` + `business` protocols).
 * @throws Baileys' Boom on platform errors (the caller maps them, docs/decisions/0001-envelope-and-error-codes.md).
 */
export async function checkPhones(sock: SocketLike, phones: readonly string[]): Promise<UserCheck[]> {
  if (phones.length === 0) return [];
  const rows = await queryPhones(sock, phones, false);
  return phones.map((query) => {
    const row = rows.get(query);
    const registered = Boolean(row?.contact?.registered);
    return {
      query,
      isInPlatform: registered,
      jid: registered && row ? (toPhoneJid(row.id) ?? row.id) : null,
      verifiedName: registered ? (row?.business ?? '') : '',
    };
  });
}

/**
 * Profile details (docs/api.md#contacts `/v1/contacts/info`): registration, about text (USync `status`), verified
 * name and the profile picture id, per number in input order.
 */
export async function userInfo(sock: SocketLike, phones: readonly string[]): Promise<UserInfo[]> {
  if (phones.length === 0) return [];
  const rows = await queryPhones(sock, phones, true);
  const out: UserInfo[] = [];
  for (const query of phones) {
    const row = rows.get(query);
    const registered = Boolean(row?.contact?.registered);
    const jid = registered && row ? (toPhoneJid(row.id) ?? row.id) : null;
    const picture = jid ? await avatarOf(sock, jid) : null;
    out.push({
      query,
      jid,
      status: registered ? (row?.status?.status ?? '') : '',
      pictureId: picture?.id ?? '',
      verifiedName: registered ? (row?.business ?? '') : '',
    });
  }
  return out;
}

/**
 * The full-size profile picture of `jid` (`w:profile:picture` query, as Baileys' `profilePictureUrl` sends it, but
 * keeping the picture id too); null when the user has none or hides it (404 item-not-found, 401 not-authorized).
 */
export async function avatarOf(sock: SocketLike, jid: string): Promise<Avatar | null> {
  try {
    const result: BinaryNode | undefined = await sock.query({
      tag: 'iq',
      attrs: { target: jid, to: S_WHATSAPP_NET, type: 'get', xmlns: 'w:profile:picture' },
      content: [{ tag: 'picture', attrs: { type: 'image', query: 'url' } }],
    });
    const picture = result ? getBinaryNodeChild(result, 'picture') : undefined;
    if (!picture?.attrs.url) return null;
    return { url: picture.attrs.url, id: picture.attrs.id ?? '' };
  } catch (error) {
    const code = (error as { data?: unknown }).data;
    if (code === 404 || code === 401 || code === 403) return null;
    throw error;
  }
}
