import { errors } from '../../domain/errors.ts';
import type { ConnectionState } from '../../domain/messages.ts';
import type { SandboxControls } from '../engine.ts';
import type { SandboxAccount } from './account.ts';
import { incomingCall } from './calls.ts';
import * as admin from './group-admin.ts';
import * as groups from './groups.ts';
import * as media from './media.ts';
import * as messaging from './messaging.ts';
import * as updates from './updates.ts';
import { isValidPhone } from './users.ts';
import type { SandboxWorld } from './world.ts';

/**
 * The simulated platform's test helpers of one sandbox session (docs/decisions/0004-sandbox.md; session.ts
 * `SandboxSession.sandbox`): each delegates to the module that simulates it, over the session's `account` view and
 * `world`; `scan` is the session's own QR scan (it changes the session's state).
 * @throws (from `defineUser`) DomainError invalid when `phone` is not digits in international format.
 */
export function sandboxControls(
  account: SandboxAccount,
  world: SandboxWorld,
  scan: (input: { code?: string; phone?: string }) => Promise<ConnectionState>,
): SandboxControls {
  return {
    scan,
    inbound: (input) => messaging.inbound(account, input),
    inboundMedia: (input) => media.inboundMedia(account, input),
    receipt: (input) => messaging.receipt(account, input),
    presence: (input) => messaging.presence(account, input),
    defineUser: async ({ phone, ...definition }) => {
      if (!isValidPhone(phone)) {
        throw errors.badRequest('phone must be digits only, international format, no leading +');
      }
      await world.defineUser(phone, definition);
    },
    createForeignGroup: (input) => groups.createForeignGroup(account, input),
    call: (input) => incomingCall(account, input),
    groupChange: (input) => admin.sandboxGroupChange(account, input),
    updateMessage: (input) => updates.updateMessage(account, input),
    vote: (input) => updates.vote(account, input),
  };
}
