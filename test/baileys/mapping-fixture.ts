import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  addTransactionCapability,
  type BinaryNode,
  decodeBinaryNode,
  decodeMessageNode,
  decryptMessageNode,
  encodeBinaryNode,
  initAuthCreds,
  jidNormalizedUser,
  proto,
  type WAMessage,
} from 'baileys';
import { makeLibSignalRepository } from 'baileys/lib/Signal/libsignal.js';
import { loadAuthState } from '../../src/engines/baileys/auth-state.ts';
import type { MappingContext } from '../../src/engines/baileys/incoming.ts';
import { JidResolver } from '../../src/engines/baileys/jid.ts';
import { SqlAuthStateStore } from '../../src/store/engine-auth.ts';
import { ME } from './fake-socket.ts';
import { liveFixture, silentLogger } from './support.ts';

/** A contact's LID, and the phone JID it stands for. */
export const PEER_LID = '12345678@lid';
/** The phone JID of {@link PEER_LID}. */
export const PEER = '5511988887777@s.whatsapp.net';
/** A group member's LID, and the phone JID it stands for. */
export const MEMBER_LID = '777000111@lid';
/** The phone JID of {@link MEMBER_LID}. */
export const MEMBER = '5511977776666@s.whatsapp.net';
/** A group's JID. */
export const GROUP = '120363000000000001@g.us';
/** The time the mapping tests record at (epoch ms). */
export const NOW = Date.parse('2030-01-01T00:00:00Z');
/** The linked account's phone JID, as the mapping context reports it. */
export const ME_PHONE_JID = `${ME.phone}@s.whatsapp.net`;

/** Encodes a stanza with Baileys' binary encoder and decodes it back, as it arrives from the socket. */
export async function wire(node: BinaryNode): Promise<BinaryNode> {
  return decodeBinaryNode(encodeBinaryNode(node));
}

/** A `<message>` stanza whose payload is a `<plaintext>` protobuf (decrypted by Baileys without signal keys). */
export function messageStanza(attrs: Record<string, string>, message: proto.IMessage): BinaryNode {
  return {
    tag: 'message',
    attrs: {
      id: `3EB0${randomBytes(8).toString('hex').toUpperCase()}`,
      t: '1700000000',
      type: 'text',
      ...attrs,
    },
    content: [{ tag: 'plaintext', attrs: {}, content: proto.Message.encode(message).finish() }],
  };
}

/** What the mapping tests read platform events with: the context, a decoder, and the store to drop after. */
export interface MappingFixture {
  /** The context the live engine maps with: a JID resolver over Baileys' LID mapping store, and the account. */
  ctx: MappingContext;
  /**
   * Decodes a stanza as the socket does: Baileys' binary decoder, then `decryptMessageNode` (which parses the
   * envelope with `decodeMessageNode` and opens the `<plaintext>` payload).
   */
  decode(stanza: BinaryNode): Promise<WAMessage>;
  /** Drops the fixture's store. */
  cleanup(): Promise<void>;
}

/**
 * A SQLite store with one live instance, its signal keys loaded as the live engine loads them, Baileys' LID mapping
 * store over them holding one pair (31313131@lid ↔ 5511933332222), and a mapping context for {@link ME}.
 */
export async function mappingFixture(): Promise<MappingFixture> {
  const logger = silentLogger();
  const fixture = await liveFixture('sqlite');
  const store = new SqlAuthStateStore(fixture.test.store.db, fixture.box, fixture.instanceIds[0] ?? '');
  const loaded = await loadAuthState(store, logger);
  const keys = addTransactionCapability(loaded.state.keys, logger, {
    maxCommitRetries: 1,
    delayBetweenTriesMs: 1,
  });
  const repository = makeLibSignalRepository({ creds: initAuthCreds(), keys }, logger);
  await repository.lidMapping.storeLIDPNMappings([
    { lid: '31313131@lid', pn: '5511933332222@s.whatsapp.net' },
  ]);
  const resolver = new JidResolver({ lookup: () => repository.lidMapping });
  const ctx: MappingContext = {
    resolver,
    me: () => ({ phoneJid: ME_PHONE_JID, lid: jidNormalizedUser(ME.lid), pushName: ME.name }),
  };
  return {
    ctx,
    async decode(stanza) {
      const node = await wire(stanza);
      const { fullMessage, decrypt } = decryptMessageNode(node, ME.id, ME.lid, repository, logger);
      assert.deepEqual(fullMessage.key, decodeMessageNode(node, ME.id, ME.lid).fullMessage.key);
      await decrypt();
      return fullMessage;
    },
    cleanup: () => fixture.test.cleanup(),
  };
}
