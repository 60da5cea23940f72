import type { Engine, EngineSession, EngineSessionContext } from '../engine.ts';
import { SandboxSession } from './session.ts';

/**
 * The simulated platform behind `svc_test_` keys (docs/decisions/0024-engines-and-data-flow.md,
 * docs/decisions/0004-sandbox.md): deterministic, in-process, one simulated account per instance, state persisted
 * through each session's auth port so logins survive restarts.
 */
export class SandboxEngine implements Engine {
  readonly name = 'sandbox' as const;

  createSession(context: EngineSessionContext): EngineSession {
    return new SandboxSession(context);
  }
}
