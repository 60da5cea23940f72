import type { Engine, EngineSession, EngineSessionContext } from './engine.ts';

/**
 * An engine whose code is loaded at its first use: {@link init} calls `load` once (a dynamic `import()` of the
 * engine's module and its construction) and every later call goes to the engine it made. A process that never runs
 * a session of this engine never loads its module graph: the live engine's (Baileys, libsignal, the platform's
 * protocol buffers) took about half a second of every start (docs/decisions/0068-engines-loaded-on-first-use.md).
 *
 * The session manager awaits `init` before it creates a session of the engine (src/sessions/session-table.ts), so
 * `createSession` finds the engine loaded.
 */
export class DeferredEngine implements Engine {
  readonly name: string;
  readonly #load: () => Promise<Engine>;
  #loading: Promise<Engine> | undefined;
  #engine: Engine | undefined;
  #closed = false;

  /**
   * @param name the engine's name, as the loaded engine gives it (`baileys`).
   * @param load imports the engine's module and constructs it; called once, by the first {@link init}. A rejection
   *   is passed to that caller and the next `init` tries again.
   */
  constructor(name: string, load: () => Promise<Engine>) {
    this.name = name;
    this.#load = load;
  }

  /**
   * Loads the engine once (and prepares it, when it has an `init` of its own); later calls resolve at once.
   * @throws what `load` or the engine's `init` threw (the next call tries again); Error after {@link close}.
   */
  async init(): Promise<void> {
    if (this.#engine) return;
    if (this.#closed) throw new Error(`engine ${this.name} is closed`);
    this.#loading ??= this.#load()
      .then(async (engine) => {
        await engine.init?.();
        this.#engine = engine;
        return engine;
      })
      .catch((error: unknown) => {
        this.#loading = undefined;
        throw error;
      });
    await this.#loading;
  }

  /**
   * The loaded engine's session for `context`.
   * @throws Error when {@link init} has not resolved yet (a caller's bug: the session manager awaits it first).
   */
  createSession(context: EngineSessionContext): EngineSession {
    if (this.#closed) throw new Error(`engine ${this.name} is closed`);
    if (!this.#engine) throw new Error(`engine ${this.name} used before init() resolved`);
    return this.#engine.createSession(context);
  }

  /**
   * Closes the loaded engine; nothing to do when it was never loaded (one still loading is awaited first). Later
   * `init` and `createSession` calls throw.
   */
  async close(): Promise<void> {
    this.#closed = true;
    const engine = this.#engine ?? (await this.#loading?.catch(() => undefined));
    await engine?.close?.();
  }
}
