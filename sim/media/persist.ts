/**
 * What the media server keeps in the simulator's state directory (`parley sim --state-dir`), so a restarted
 * simulator serves the same media as before: its TLS identity (the CA clients were told to trust, the server
 * certificate), the key that signs direct paths (`oh`), its port (the host is part of every media URL a message
 * carries), and the encrypted files uploaded so far. Written atomically (temp file, then rename), as
 * model/state.ts writes the account state.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { StoredMedia } from './server.ts';
import type { MediaTls } from './tls.ts';

/** The media server's identity across restarts. */
export interface MediaIdentity {
  tls: MediaTls;
  /** HMAC-SHA256 key (32 bytes) of the direct paths' `oh` signatures. */
  signing: Buffer;
  /** TCP port the server listened on; undefined before its first start. */
  port?: number;
}

/** Thrown when a media state file exists but cannot be read back; names the file. */
export class MediaStateError extends Error {}

const IDENTITY_FILE = 'media-identity.json';

function writeAtomically(path: string, data: string | Buffer): void {
  const temp = `${path}.tmp`;
  writeFileSync(temp, data);
  renameSync(temp, path);
}

/**
 * Reads `dir/media-identity.json`; undefined when there is none (a fresh state directory). Throws
 * MediaStateError when the file exists but is not an identity this module wrote.
 */
export function loadMediaIdentity(dir: string): MediaIdentity | undefined {
  const path = join(dir, IDENTITY_FILE);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  try {
    const saved = JSON.parse(text) as {
      ca: string;
      cert: string;
      key: string;
      signing: string;
      port?: number;
    };
    if (![saved.ca, saved.cert, saved.key, saved.signing].every((v) => typeof v === 'string'))
      throw new Error('missing fields');
    return {
      tls: { ca: saved.ca, server: { cert: saved.cert, key: saved.key } },
      signing: Buffer.from(saved.signing, 'hex'),
      ...(typeof saved.port === 'number' ? { port: saved.port } : {}),
    };
  } catch (error) {
    throw new MediaStateError(
      `media state ${path} cannot be read back (${(error as Error).message}); move it away to start fresh`,
    );
  }
}

/** Writes `identity` to `dir/media-identity.json` (creating `dir`). */
export function saveMediaIdentity(dir: string, identity: MediaIdentity): void {
  mkdirSync(dir, { recursive: true });
  writeAtomically(
    join(dir, IDENTITY_FILE),
    JSON.stringify({
      ca: identity.tls.ca,
      cert: identity.tls.server.cert,
      key: identity.tls.server.key,
      signing: identity.signing.toString('hex'),
      ...(identity.port !== undefined ? { port: identity.port } : {}),
    }),
  );
}

/**
 * The uploaded files on disk under `dir/media/`: `<name>.enc` holds the encrypted bytes and `<name>.json` the
 * record (kind, path, direct path, URL), where `<name>` is the direct path's file name.
 */
export class MediaFiles {
  readonly dir: string;

  constructor(stateDir: string) {
    this.dir = join(stateDir, 'media');
    mkdirSync(this.dir, { recursive: true });
  }

  /** Every stored file, read back. Throws MediaStateError naming a record that cannot be read. */
  load(): StoredMedia[] {
    const out: StoredMedia[] = [];
    for (const name of readdirSync(this.dir)) {
      if (!name.endsWith('.json')) continue;
      const path = join(this.dir, name);
      try {
        const record = JSON.parse(readFileSync(path, 'utf8')) as Omit<StoredMedia, 'file'>;
        const file = readFileSync(join(this.dir, name.replace(/\.json$/, '.enc')));
        out.push({ ...record, file });
      } catch (error) {
        throw new MediaStateError(`media record ${path} cannot be read back (${(error as Error).message})`);
      }
    }
    return out;
  }

  /** Writes one stored file (bytes first, then its record, so a record never names missing bytes). */
  save(stored: StoredMedia): void {
    const name =
      stored.path
        .split('/')
        .pop()
        ?.replace(/\.enc$/, '') ?? '';
    if (!/^[0-9_a-z]+$/.test(name)) throw new MediaStateError(`unexpected media path ${stored.path}`);
    writeAtomically(join(this.dir, `${name}.enc`), stored.file);
    const { file: _file, ...record } = stored;
    writeAtomically(join(this.dir, `${name}.json`), JSON.stringify(record));
  }
}
