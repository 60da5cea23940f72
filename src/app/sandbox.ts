import type { RegistrationCache } from '../contacts/registration-cache.ts';
import { DomainError, errors } from '../domain/errors.ts';
import type { Instance } from '../domain/instance.ts';
import type { GroupInfo, SentMessage } from '../domain/messages.ts';
import type {
  SandboxCallInput,
  SandboxControls,
  SandboxForeignGroupInput,
  SandboxGroupChangeInput,
  SandboxInboundInput,
  SandboxInboundMediaInput,
  SandboxMediaKind,
  SandboxPresenceInput,
  SandboxReceiptInput,
  SandboxUpdateInput,
  SandboxUserInput,
  SandboxVoteInput,
} from '../engines/engine.ts';
import { MB, type MediaRule } from '../media/kinds.ts';
import { decodeDataUri } from '../media/source.ts';
import type { SessionManager } from '../sessions/manager.ts';
import type { Store } from '../store/database.ts';
import { findInstanceByPhone } from '../store/instances.ts';

/** A media file a simulated user sends (`POST /v1/sandbox/inbound/media`): the file as a base64 data URI. */
export type SandboxMediaRequest = Omit<SandboxInboundMediaInput, 'data' | 'mimetype'> & { media: string };

/** The sandbox's limit for a file a simulated user sends, as the platform simulator's (16 MB, any format). */
const SANDBOX_MEDIA_RULE: MediaRule = {
  maxBytes: 16 * MB,
  maxLabel: '16 MB',
  formats: null,
  formatsLabel: 'any format',
};

/** The MIME type a phone declares by kind when the file names none (as the platform simulator does). */
const DEFAULT_TYPES: Record<SandboxMediaKind, string> = {
  image: 'image/jpeg',
  video: 'video/mp4',
  audio: 'audio/ogg; codecs=opus',
  document: 'application/pdf',
  sticker: 'image/webp',
};

/** The type a `data:<type>[;params];base64,…` URI declares (with its parameters), or undefined. */
function declaredType(uri: string): string | undefined {
  const header = uri.trim().slice(5, Math.max(5, uri.trim().indexOf(',')));
  const parts = header
    .split(';')
    .map((p) => p.trim())
    .filter((p) => p !== '' && p.toLowerCase() !== 'base64');
  const [type, ...params] = parts;
  if (type === undefined || !/^[\w.+-]+\/[\w.+-]+$/.test(type)) return undefined;
  return [type.toLowerCase(), ...params].join('; ');
}

/**
 * Checks that only the fields of `input.kind` are given: `caption` not for audio and stickers, `fileName` for
 * documents only, `ptt` for audio only.
 * @throws DomainError invalid naming the field and the kinds it belongs to.
 */
function checkKindFields(input: SandboxMediaRequest): void {
  if (input.caption !== undefined && (input.kind === 'audio' || input.kind === 'sticker'))
    throw errors.badRequest('caption is only for image, video and document');
  if (input.fileName !== undefined && input.kind !== 'document')
    throw errors.badRequest('fileName is only for document');
  if (input.ptt !== undefined && input.kind !== 'audio') throw errors.badRequest('ptt is only for audio');
}

/**
 * The sandbox family (docs/decisions/0004-sandbox.md): the simulated platform's test helpers of a test instance.
 * Operations other than `scan` answer not_logged_in / not_connected themselves before login
 * (docs/decisions/0001-envelope-and-error-codes.md).
 */
export class SandboxService {
  readonly #store: Store;
  readonly #sessions: SessionManager;
  readonly #registrations: RegistrationCache;

  constructor(deps: { store: Store; sessions: SessionManager; registrations: RegistrationCache }) {
    this.#store = deps.store;
    this.#sessions = deps.sessions;
    this.#registrations = deps.registrations;
  }

  /**
   * The instance's simulated platform, through the session this process holds (never a new kept one: a request
   * that reaches a node whose session is not restored yet must not leave an idle session behind).
   * @throws DomainError not_found on a live instance; platform_unreachable (503, `retryAfter`) while a session that
   *   should be connected is not here (SessionManager.current).
   */
  async #controls(instance: Instance): Promise<SandboxControls> {
    // Test instances run on the sandbox engine (SessionManager picks the engine by environment).
    const controls = instance.env === 'test' ? (await this.#sessions.current(instance)).sandbox : undefined;
    if (!controls) throw errors.notFound('sandbox helpers exist only for svc_test_ keys');
    return controls;
  }

  /**
   * The owner scans the current QR: logs in as `phone` (generated when omitted).
   * @returns the phone number logged in.
   * @throws DomainError conflict `already logged in`, `phone <p> is already linked to another instance`;
   *   not_connected when no pairing runs.
   */
  async scan(instance: Instance, input: { code?: string; phone?: string }): Promise<string> {
    const controls = this.#sessions.existing(instance.id)?.sandbox;
    if (!controls) throw instance.jid !== null ? errors.alreadyLoggedIn() : errors.notConnected();
    const phone = input.phone;
    if (phone !== undefined) {
      const holder = await findInstanceByPhone(this.#store.db, instance.orgId, instance.env, phone);
      if (holder && holder.id !== instance.id) {
        throw new DomainError('conflict', `phone ${phone} is already linked to another instance`);
      }
    }
    const state = await controls.scan(input);
    return state.phone ?? '';
  }

  /** A message arrives from a simulated user. See {@link SandboxControls.inbound}. */
  async inbound(instance: Instance, input: SandboxInboundInput): Promise<SentMessage> {
    return (await this.#controls(instance)).inbound(input);
  }

  /**
   * A media file arrives from a simulated user: `media` is a base64 data URI of at most 16 MB whose declared
   * type becomes the message's MIME type (the kind's usual type when it declares none). See
   * {@link SandboxControls.inboundMedia}.
   * @throws DomainError invalid for a malformed data URI or a field the kind does not take; too_large over 16 MB.
   */
  async inboundMedia(instance: Instance, input: SandboxMediaRequest): Promise<SentMessage> {
    const { media, ...rest } = input;
    checkKindFields(input);
    const data = decodeDataUri(media.trim(), 'media', SANDBOX_MEDIA_RULE);
    return (await this.#controls(instance)).inboundMedia({
      ...rest,
      data,
      mimetype: declaredType(media) ?? DEFAULT_TYPES[input.kind],
    });
  }

  /** The recipient acknowledges a sent message. See {@link SandboxControls.receipt}. */
  async receipt(instance: Instance, input: SandboxReceiptInput): Promise<void> {
    return (await this.#controls(instance)).receipt(input);
  }

  /** A simulated user starts or stops typing. See {@link SandboxControls.presence}. */
  async presence(instance: Instance, input: SandboxPresenceInput): Promise<void> {
    return (await this.#controls(instance)).presence(input);
  }

  /**
   * Defines a simulated user and forgets the cached registration answer for its number
   * (docs/decisions/0001-envelope-and-error-codes.md, docs/decisions/0004-sandbox.md).
   */
  async defineUser(instance: Instance, input: SandboxUserInput): Promise<void> {
    await (await this.#controls(instance)).defineUser(input);
    this.#registrations.invalidate(instance.id, input.phone);
  }

  /** A group another user created with the account as a plain member. See {@link SandboxControls.createForeignGroup}. */
  async createForeignGroup(instance: Instance, input: SandboxForeignGroupInput): Promise<GroupInfo> {
    return (await this.#controls(instance)).createForeignGroup(input);
  }

  /** A simulated user calls the account. See {@link SandboxControls.call}. */
  async call(
    instance: Instance,
    input: SandboxCallInput,
  ): Promise<{ id: string; status: 'missed' | 'rejected' | 'ringing' }> {
    return (await this.#controls(instance)).call(input);
  }

  /** A simulated member changes a group. See {@link SandboxControls.groupChange}. */
  async groupChange(instance: Instance, input: SandboxGroupChangeInput): Promise<GroupInfo> {
    return (await this.#controls(instance)).groupChange(input);
  }

  /** A simulated user edits or deletes their message. See {@link SandboxControls.updateMessage}. */
  async updateMessage(instance: Instance, input: SandboxUpdateInput): Promise<void> {
    return (await this.#controls(instance)).updateMessage(input);
  }

  /** A simulated user votes on a poll the instance sent. See {@link SandboxControls.vote}. */
  async vote(instance: Instance, input: SandboxVoteInput): Promise<void> {
    return (await this.#controls(instance)).vote(input);
  }
}
