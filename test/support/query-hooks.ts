import type { KyselyPlugin } from 'kysely';

/** A Kysely plugin that pauses one query between its answer and its caller, and the switch that arms it. */
export interface ArmedPause {
  /** Add to the store's Kysely instance (`db.withPlugin(plugin)`) or to the test store's plugins. */
  plugin: KyselyPlugin;
  /** Runs `hook` once, after the next query whose first row `matches` returned, before its caller reads it. */
  arm(hook: () => Promise<void>): void;
}

/**
 * A plugin for races at a precise instant: once armed, the first query whose first returned row satisfies
 * `matches` waits for the armed hook before its rows reach the code that ran it (so a test can change the store
 * between a claim's statement and what follows it). Disarms itself after firing; queries before arming pass.
 */
export function pauseAfterRows(matches: (first: object) => boolean): ArmedPause {
  let armed: (() => Promise<void>) | undefined;
  return {
    plugin: {
      transformQuery: ({ node }) => node,
      async transformResult({ result }) {
        const first = result.rows[0];
        const hook = armed;
        if (hook !== undefined && typeof first === 'object' && first !== null && matches(first)) {
          armed = undefined;
          await hook();
        }
        return result;
      },
    },
    arm(hook) {
      armed = hook;
    },
  };
}
