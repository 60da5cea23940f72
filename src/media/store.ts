import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Clock } from '../domain/clock.ts';
import { DomainError } from '../domain/errors.ts';
import { detectFormat } from './detect.ts';

/** What the store keeps beside a file: its MIME type from the bytes, its size, and when it was fetched. */
export interface StoredMediaFile {
  /** MIME type decided from the bytes (npm `file-type`), `application/octet-stream` when they do not tell. */
  mimetype: string;
  /** The `file-type` extension of the bytes, `''` when they do not tell. */
  ext: string;
  /** Bytes. */
  size: number;
  /** When the file was fetched from the platform, epoch ms (retention counts from here). */
  storedAt: number;
}

/** Options of {@link MediaStore}. */
export interface MediaStoreOptions {
  /** The folder holding the files (`<DATA_DIR>/media`); created on first write. */
  dir: string;
  clock: Clock;
}

/** How many leading bytes `file-type` reads to decide a format. */
const SNIFF_BYTES = 4100;

/**
 * The local store of media files fetched from the platform (`GET /v1/messages/{id}/media`): one file per message
 * under `<dir>/<instance id>/<SHA-256 of the message id>`, with a `.json` beside it ({@link StoredMediaFile}).
 * A file is written to a temporary name and renamed when complete, so a reader never sees half a file and a
 * failed or refused download leaves nothing. Each process keeps its own store (under its own DATA_DIR); a
 * process that lacks a file fetches it again.
 */
export class MediaStore {
  readonly #dir: string;
  readonly #clock: Clock;

  constructor(options: MediaStoreOptions) {
    this.#dir = options.dir;
    this.#clock = options.clock;
  }

  #paths(instanceId: string, messageId: string): { file: string; meta: string; folder: string } {
    const folder = join(this.#dir, safeSegment(instanceId));
    const name = createHash('sha256').update(messageId).digest('hex');
    return { folder, file: join(folder, name), meta: join(folder, `${name}.json`) };
  }

  /** The stored file of message `messageId` of an instance, or undefined when the store does not hold it. */
  async find(instanceId: string, messageId: string): Promise<StoredMediaFile | undefined> {
    const { meta } = this.#paths(instanceId, messageId);
    try {
      return JSON.parse(await readFile(meta, 'utf8')) as StoredMediaFile;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  /** A stream of the stored bytes of message `messageId` (call after {@link find} said it is there). */
  read(instanceId: string, messageId: string): Readable {
    return createReadStream(this.#paths(instanceId, messageId).file);
  }

  /**
   * Writes the bytes `source` yields as the file of message `messageId`, replacing any earlier one.
   * @param maxBytes the largest file accepted; the write stops as soon as the bytes pass it.
   * @param limitLabel the limit as the 413 message names it (`the 100 MB limit (MEDIA_MAX_MB)`).
   * @throws DomainError too_large `media of message <id> is larger than <limit>` (nothing is kept); the
   *   source's own errors (nothing is kept either).
   */
  async put(
    instanceId: string,
    messageId: string,
    source: AsyncIterable<Buffer>,
    maxBytes: number,
    limitLabel: string,
  ): Promise<StoredMediaFile> {
    const { folder, file, meta } = this.#paths(instanceId, messageId);
    await mkdir(folder, { recursive: true });
    const temp = join(folder, `.${randomUUID()}.part`);
    let size = 0;
    const head: Buffer[] = [];
    let headBytes = 0;
    async function* counted(): AsyncGenerator<Buffer> {
      for await (const chunk of source) {
        size += chunk.length;
        if (size > maxBytes) {
          throw new DomainError('too_large', `media of message ${messageId} is larger than ${limitLabel}`);
        }
        if (headBytes < SNIFF_BYTES) {
          head.push(chunk);
          headBytes += chunk.length;
        }
        yield chunk;
      }
    }
    try {
      await pipeline(counted(), createWriteStream(temp));
      const found = await detectFormat(Buffer.concat(head).subarray(0, SNIFF_BYTES));
      const stored: StoredMediaFile = {
        mimetype: found?.mime ?? 'application/octet-stream',
        ext: found?.ext ?? '',
        size,
        storedAt: this.#clock(),
      };
      await rename(temp, file);
      await writeFile(meta, JSON.stringify(stored));
      return stored;
    } catch (error) {
      await rm(temp, { force: true });
      throw error;
    }
  }

  /**
   * Deletes every file of instance `instanceId` (the instance was deleted, docs/decisions/0029-instances-over-the-api.md).
   * Only this process's store: another node's copies go with its retention.
   */
  async removeInstance(instanceId: string): Promise<void> {
    await rm(join(this.#dir, safeSegment(instanceId)), { recursive: true, force: true });
  }

  /**
   * Deletes every file fetched before `before` (epoch ms), with its description; leftovers of interrupted
   * writes (a partial file, a file whose description was never written) go too once they are an hour old.
   * @returns how many files were deleted.
   */
  async prune(before: number): Promise<number> {
    let deleted = 0;
    let instances: string[];
    try {
      instances = await readdir(this.#dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw error;
    }
    for (const instance of instances) {
      const folder = join(this.#dir, instance);
      let names: string[];
      try {
        names = await readdir(folder);
      } catch {
        continue;
      }
      const described = new Set(names.filter((n) => n.endsWith('.json')).map((n) => n.slice(0, -5)));
      // A write in progress is never this old: older leftovers are from a process that stopped mid-write.
      const stale = Math.min(before, Date.now() - 3_600_000);
      for (const name of names) {
        const leftover = name.endsWith('.part') || (!name.endsWith('.json') && !described.has(name));
        if (leftover) {
          if (await olderThan(join(folder, name), stale)) await rm(join(folder, name), { force: true });
          continue;
        }
        if (!name.endsWith('.json')) continue;
        const meta = join(folder, name);
        let stored: StoredMediaFile | undefined;
        try {
          stored = JSON.parse(await readFile(meta, 'utf8')) as StoredMediaFile;
        } catch {
          stored = undefined;
        }
        if (stored && stored.storedAt >= before) continue;
        // The description goes first: a reader that finds no description fetches the file again.
        await rm(meta, { force: true });
        await rm(join(folder, name.slice(0, -'.json'.length)), { force: true });
        deleted += 1;
      }
    }
    return deleted;
  }
}

/** True when file `path` was last modified before `before` (epoch ms of the file system's clock). */
async function olderThan(path: string, before: number): Promise<boolean> {
  const handle = await open(path, 'r').catch(() => undefined);
  if (!handle) return false;
  try {
    return (await handle.stat()).mtimeMs < before;
  } finally {
    await handle.close();
  }
}

/** An instance id as a folder name: UUIDs pass unchanged, anything else is hashed. */
function safeSegment(value: string): string {
  return /^[A-Za-z0-9-]{1,64}$/.test(value) ? value : createHash('sha256').update(value).digest('hex');
}
