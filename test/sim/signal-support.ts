/**
 * The Baileys side of the Signal tests: a Baileys 7 companion's own signal repository (the one makeWASocket
 * builds: DEFAULT_CONNECTION_CONFIG.makeSignalRepository = makeLibSignalRepository) over an in-memory
 * SignalKeyStore with Baileys' key-store shape and transaction capability, plus the wire round trip every
 * node takes (Baileys' binary encoder and decoder).
 */
import {
  type AuthenticationCreds,
  addTransactionCapability,
  type BinaryNode,
  DEFAULT_CONNECTION_CONFIG,
  decodeBinaryNode,
  encodeBinaryNode,
  initAuthCreds,
  type SignalDataSet,
  type SignalDataTypeMap,
  type SignalKeyStore,
  type SignalKeyStoreWithTransaction,
  type SignalRepositoryWithLIDStore,
} from 'baileys';
import pino from 'pino';

const logger = pino({ level: process.env.BAILEYS_TEST_LOG ?? 'silent' });

/** Baileys' SignalKeyStore over plain maps (the shape useMultiFileAuthState implements over files). */
function memoryKeyStore(): SignalKeyStore {
  const data = new Map<string, Map<string, unknown>>();
  return {
    async get(type, ids) {
      const out: Record<string, unknown> = {};
      for (const id of ids) {
        const value = data.get(type)?.get(id);
        if (value !== undefined) out[id] = value;
      }
      return out as { [id: string]: SignalDataTypeMap[typeof type] };
    },
    async set(set: SignalDataSet) {
      for (const [type, values] of Object.entries(set)) {
        const table = data.get(type) ?? new Map<string, unknown>();
        data.set(type, table);
        for (const [id, value] of Object.entries(values ?? {})) {
          if (value === null || value === undefined) table.delete(id);
          else table.set(id, value);
        }
      }
    },
  };
}

/** A Baileys companion device: its creds, key store and signal repository. */
export interface BaileysDevice {
  creds: AuthenticationCreds;
  keys: SignalKeyStoreWithTransaction;
  repository: SignalRepositoryWithLIDStore;
  /** `creds.me.id`, the device's PN JID (`<phone>:<device>@s.whatsapp.net`). */
  jid: string;
  /** `creds.me.lid` (`<lid>:<device>@lid`). */
  lid: string;
}

/**
 * A logged-in Baileys companion `phone:device` with LID `lid:device`, fresh keys from initAuthCreds(); its own
 * PN→LID mapping stored as Baileys does on `<success lid>` (Socket/socket.js).
 */
export async function baileysDevice(phone: string, lid: string, device: number): Promise<BaileysDevice> {
  const creds = initAuthCreds();
  const jid = `${phone}:${device}@s.whatsapp.net`;
  const lidJid = `${lid}:${device}@lid`;
  creds.me = { id: jid, lid: lidJid, name: 'parley' };
  const keys = addTransactionCapability(memoryKeyStore(), logger, {
    maxCommitRetries: 1,
    delayBetweenTriesMs: 1,
  });
  const repository = DEFAULT_CONNECTION_CONFIG.makeSignalRepository({ creds, keys }, logger);
  await repository.lidMapping.storeLIDPNMappings([{ lid: lidJid, pn: jid }]);
  return { creds, keys, repository, jid, lid: lidJid };
}

/** `node` after the trip through the wire: Baileys' binary encoder, then its decoder (byte contents as Buffers). */
export async function wire(node: BinaryNode): Promise<BinaryNode> {
  return decodeBinaryNode(encodeBinaryNode(node));
}

export { logger as baileysLogger };
