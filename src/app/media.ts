import type { Readable } from 'node:stream';
import { DomainError, errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import type { MessageKind } from '../domain/messages.ts';
import type { MediaStore } from '../media/store.ts';
import type { SessionManager } from '../sessions/manager.ts';
import type { Store } from '../store/database.ts';
import { findStoredMessage, setMessageDownload } from '../store/messages.ts';

/** The message kinds that carry a file. */
const MEDIA_KINDS: ReadonlySet<MessageKind> = new Set(['image', 'video', 'audio', 'document', 'sticker']);

/** A media file ready to be served: what the message says about it, what its bytes are, and the bytes. */
export interface MediaFile {
  /** The message's kind (`image`, `video`, `audio`, `document`, `sticker`). */
  kind: MessageKind;
  /** Bytes. */
  size: number;
  /** MIME type decided from the bytes; `application/octet-stream` when they do not tell. */
  mimetype: string;
  /** The `file-type` extension of the bytes, `''` when they do not tell. */
  ext: string;
  /** The file name the sender gave (documents), if any. */
  fileName: string | undefined;
  /** Opens the bytes (each call a new stream). */
  open(): Readable;
}

/** What the service is built from. */
export interface MediaServiceDeps {
  store: Store;
  sessions: SessionManager;
  files: MediaStore;
  /** Largest file downloaded, bytes (`MEDIA_MAX_MB`). */
  maxBytes: number;
}

/**
 * Received media (`GET /v1/messages/{id}/media`): the file of a stored media message, from the local media
 * store when it holds it, else fetched from the platform through the instance's engine (whether or not the
 * session is connected while the platform's link is valid), kept in the store, then served. When the link
 * expired the engine asks the sender's phone to upload the file again and the message's new reference is stored
 * (docs/decisions/0046-media-re-upload.md). Concurrent requests for the same file share one download, so one
 * re-upload request.
 */
export class MediaService {
  readonly #deps: MediaServiceDeps;
  readonly #inflight = new Map<string, Promise<MediaFile>>();

  constructor(deps: MediaServiceDeps) {
    this.#deps = deps;
  }

  /** The limit as people read it (`100 MB`). */
  get #limitLabel(): string {
    return `${Math.round(this.#deps.maxBytes / (1024 * 1024))} MB`;
  }

  /**
   * The file of message `messageId` of the instance.
   * @throws DomainError not_found `instance not found`, `message <id> not found`, `message <id> has no media
   *   (it is a <kind> message)`, `the media of message <id> cannot be downloaded: …` (files parley sent itself
   *   are not kept); too_large when the file is larger than the limit (nothing is fetched or kept); gone when
   *   the platform no longer has the file and the sender's phone could not upload it again; not_connected (and
   *   the other connection errors) when the link expired and the phone cannot be asked now; platform errors of
   *   the download as raised.
   */
  async open(instance: Instance, messageId: string): Promise<MediaFile> {
    const { store, sessions, files, maxBytes } = this.#deps;
    const message = await findStoredMessage(store.db, instance.id, messageId);
    if (!message) throw errors.notFound(`message ${messageId} not found`);
    const { content } = message;
    if (!MEDIA_KINDS.has(content.kind)) {
      throw errors.notFound(`message ${messageId} has no media (it is a ${content.kind} message)`);
    }
    if (content.fileLength !== undefined && content.fileLength > maxBytes) {
      throw new DomainError(
        'too_large',
        `media of message ${messageId} is ${content.fileLength} bytes, larger than the ${this.#limitLabel} limit (MEDIA_MAX_MB)`,
      );
    }
    const fileName = content.fileName;
    const cached = await files.find(instance.id, messageId);
    if (cached) return this.#file(instance.id, messageId, content.kind, fileName, cached);
    const session = await sessions.detached(instance);
    if (content.download === undefined || !session.downloadMedia) {
      throw errors.notFound(
        `the media of message ${messageId} cannot be downloaded: parley keeps no platform reference for it (files sent through parley are not kept)`,
      );
    }
    const key = `${instance.id}\n${messageId}`;
    let pending = this.#inflight.get(key);
    if (!pending) {
      const download = session.downloadMedia.bind(session);
      const limit = `the ${this.#limitLabel} limit (MEDIA_MAX_MB)`;
      pending = (async () => {
        try {
          // A re-uploaded file's new reference is stored before it is fetched, so every later download (on
          // any node) uses it (docs/decisions/0046-media-re-upload.md).
          const onMoved = async (moved: string) => {
            await setMessageDownload(store.db, instance.id, messageId, moved);
          };
          const source = await download(message, maxBytes, { onMoved });
          const stored = await files.put(instance.id, messageId, source, maxBytes, limit);
          return this.#file(instance.id, messageId, content.kind, fileName, stored);
        } catch (error) {
          // The engine may notice first (a declared length, the bytes so far): one message either way.
          if (error instanceof DomainError && error.code === 'too_large')
            throw new DomainError('too_large', `media of message ${messageId} is larger than ${limit}`);
          throw error;
        }
      })().finally(() => this.#inflight.delete(key));
      this.#inflight.set(key, pending);
    }
    return pending;
  }

  #file(
    instanceId: string,
    messageId: string,
    kind: MessageKind,
    fileName: string | undefined,
    stored: { size: number; mimetype: string; ext: string },
  ): MediaFile {
    const files = this.#deps.files;
    return {
      kind,
      size: stored.size,
      mimetype: stored.mimetype,
      ext: stored.ext,
      fileName,
      open: () => files.read(instanceId, messageId),
    };
  }
}
