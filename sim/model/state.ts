/**
 * The simulator's state on disk (`parley sim --state-dir DIR`, `startSimulator({ stateDir })`): the root key and
 * every account (LID, account key, the phone's Signal state, linked devices with their Noise keys and uploaded
 * Signal keys, offline queues, inbox, restrictions), so a simulator restarted on the same port lets every linked
 * device log in again without a scan; and the groups with their members, roles, invite codes and settings.
 *
 * One file, `DIR/state.json`, JSON with byte strings as `{"$bytes":"<base64>"}`, Maps as `{"$map":[[k,v]…]}` and
 * Sets as `{"$set":[…]}` (so model state added later needs no codec of its own while it is plain data).
 * Written after changes (coalesced: at most one write per {@link WRITE_DELAY_MS}) and once more at close,
 * atomically: to `state.json.tmp`, then renamed over `state.json`, so a crash leaves the previous or the new file,
 * never half of one. A missing file is a fresh start; a file that cannot be read back raises {@link StateError}
 * (the simulator refuses to start rather than forget accounts silently).
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { proto } from 'baileys';
import type { Logger } from 'pino';
import type { KeyPair } from '../noise/certificates.ts';
import type { Accounts, SavedUser, User } from './accounts.ts';
import { restoreGroups, type SavedGroup, saveGroups } from './group-state.ts';

/** Version of the file layout; a file of another version is refused. */
export const STATE_VERSION = 1;

/** Name of the state file inside the state directory. */
export const STATE_FILE = 'state.json';

/** Longest time a change waits before it is written, ms (changes meanwhile share the write). */
export const WRITE_DELAY_MS = 200;

/** A state file that exists but cannot be used; the message names the file, the problem and the way out. */
export class StateError extends Error {
  override readonly name = 'StateError';
}

/** What the state file holds. */
export interface SimState {
  root: KeyPair;
  users: SavedUser[];
  /** Groups (model/group-state.ts); absent in files written before groups were kept. */
  groups?: SavedGroup[];
}

/** JSON.stringify replacer: Uint8Array/Buffer → `{ $bytes }`, Map → `{ $map }`, Set → `{ $set }` (reads the raw value). */
function replacer(this: Record<string, unknown>, key: string, value: unknown): unknown {
  const raw = this[key];
  if (raw instanceof Uint8Array) {
    return { $bytes: Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('base64') };
  }
  if (raw instanceof Map) return { $map: [...raw.entries()] };
  if (raw instanceof Set) return { $set: [...raw.values()] };
  return value;
}

/** JSON.parse reviver, the inverse of {@link replacer}. */
function reviver(_key: string, value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const record = value as { $bytes?: unknown; $map?: unknown; $set?: unknown };
  if (typeof record.$bytes === 'string' && Object.keys(record).length === 1) {
    return Buffer.from(record.$bytes, 'base64');
  }
  if (Array.isArray(record.$map) && Object.keys(record).length === 1) {
    return new Map(record.$map as [unknown, unknown][]);
  }
  if (Array.isArray(record.$set) && Object.keys(record).length === 1) return new Set(record.$set);
  return value;
}

/** Encodes a state as the file's text. */
export function encodeState(state: SimState): string {
  return JSON.stringify({ version: STATE_VERSION, savedAt: new Date().toISOString(), ...state }, replacer);
}

function fail(path: string, problem: string): never {
  throw new StateError(
    `simulator state file ${path} ${problem}; move it away (or start without --state-dir) to start fresh`,
  );
}

/**
 * Decodes the file's text. Checks the layout version and the parts a login needs (root key, users with phone,
 * LID, account key, handset, devices).
 * @throws StateError naming `path` and what is wrong.
 */
export function decodeState(text: string, path: string): SimState {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text, reviver);
  } catch (error) {
    fail(path, `is not valid JSON (${(error as Error).message})`);
  }
  const state = parsed as Partial<SimState> & { version?: unknown };
  if (typeof state !== 'object' || state === null) fail(path, 'does not hold an object');
  if (state.version !== STATE_VERSION) {
    fail(path, `has layout version ${String(state.version)}, this simulator reads ${STATE_VERSION}`);
  }
  const isKey = (k: unknown, length: number) => Buffer.isBuffer(k) && k.length === length;
  if (!isKey(state.root?.public, 32) || !isKey(state.root?.private, 32)) {
    fail(path, 'has no valid root key (32-byte public and private halves)');
  }
  if (!Array.isArray(state.users)) fail(path, 'has no users list');
  for (const [index, user] of state.users.entries()) {
    const ok =
      typeof user?.phone === 'string' &&
      typeof user.lid === 'string' &&
      isKey(user.accountKey?.public, 32) &&
      isKey(user.handset?.identity?.pubKey, 33) &&
      user.handset?.store?.sessions instanceof Map &&
      Array.isArray(user.devices) &&
      Array.isArray(user.inbox) &&
      user.sent instanceof Map;
    if (!ok) fail(path, `has an incomplete user at index ${index}`);
  }
  return state as SimState;
}

/** The state of `accounts` and `root`, ready for {@link encodeState} (no copy: encode it at once). */
export function snapshot(root: KeyPair, accounts: Accounts): SimState {
  return { root, users: accounts.all().map(saveUser), groups: saveGroups(accounts) };
}

function saveUser(user: User): SavedUser {
  const { handset, devices, sent, ...rest } = user;
  return {
    ...rest,
    handset: handset.exportState(),
    devices: [...devices.values()].map(({ sockets: _sockets, ...device }) => device),
    // proto.IMessage objects carry Longs and class instances: kept as the encoded protobuf.
    sent: new Map(
      [...sent].map(([id, entry]) => [
        id,
        { to: entry.to, message: proto.Message.encode(entry.message).finish() as unknown as proto.IMessage },
      ]),
    ),
  };
}

/**
 * Puts every user of `state` into `accounts` (which must be empty), decoding the messages they sent, then its
 * groups (model/group-state.ts).
 * @throws StateError naming `path` when a user cannot be restored (a duplicate, a message that does not decode) or
 *   a group names someone who is no user.
 */
export function restoreUsers(state: SimState, accounts: Accounts, path: string): void {
  for (const saved of state.users) {
    try {
      restoreUser(saved, accounts);
    } catch (error) {
      fail(path, `has a user that cannot be restored (${saved.phone}: ${(error as Error).message})`);
    }
  }
  try {
    restoreGroups(state.groups ?? [], accounts);
  } catch (error) {
    fail(path, `has a group that cannot be restored (${(error as Error).message})`);
  }
}

function restoreUser(saved: SavedUser, accounts: Accounts): void {
  const sent = new Map(
    [...saved.sent].map(([id, entry]) => [
      id,
      { to: entry.to, message: proto.Message.decode(entry.message as unknown as Uint8Array) },
    ]),
  );
  accounts.restore({ ...saved, sent });
}

/**
 * The state file of one simulator: reads it at start, writes it after changes and at close.
 * `take` builds the current state when a write happens.
 */
export class StateFile {
  readonly path: string;
  private readonly temp: string;
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();
  private closed = false;

  /** Creates `dir` when missing. @throws the file system's error when it cannot. */
  constructor(
    dir: string,
    private readonly take: () => SimState,
    private readonly log: Logger,
  ) {
    mkdirSync(dir, { recursive: true });
    this.path = join(dir, STATE_FILE);
    this.temp = `${this.path}.tmp`;
  }

  /** The state file's path in `dir`. */
  static pathIn(dir: string): string {
    return join(dir, STATE_FILE);
  }

  /**
   * The saved state, or undefined when there is no file yet (a fresh start).
   * @throws StateError when the file exists but cannot be used.
   */
  static read(dir: string): SimState | undefined {
    const path = StateFile.pathIn(dir);
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new StateError(`cannot read simulator state file ${path}: ${(error as Error).message}`);
    }
    return decodeState(text, path);
  }

  /** Something changed: writes the state within {@link WRITE_DELAY_MS} (one write for many changes). */
  changed(): void {
    if (this.closed || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.writing = this.writing.then(() => this.write());
    }, WRITE_DELAY_MS);
    this.timer.unref();
  }

  private async write(): Promise<void> {
    try {
      await writeFile(this.temp, encodeState(this.take()));
      await rename(this.temp, this.path);
    } catch (error) {
      this.log.error({ err: error, path: this.path }, 'writing the simulator state failed');
    }
  }

  /** Writes the final state synchronously after any write under way, and stops writing. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.writing;
    writeFileSync(this.temp, encodeState(this.take()));
    renameSync(this.temp, this.path);
  }
}
