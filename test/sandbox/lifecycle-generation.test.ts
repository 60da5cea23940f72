/**
 * A sandbox connect that is still reading the stored credentials when a disconnect, logout or close ends the
 * session's connection never opens after it (src/engines/sandbox/lifecycle.ts, docs/decisions/0016-session-lifecycle.md):
 * the later call wins, as it does on the live engine. Over an in-memory auth port whose first read is held.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { EngineEvent } from '../../src/domain/events.ts';
import type { AuthEntry, EngineSessionContext } from '../../src/engines/engine.ts';
import { SandboxLifecycle } from '../../src/engines/sandbox/lifecycle.ts';

const CREDS = JSON.stringify({
  phone: '5511999990501',
  jid: '5511999990501.0:1@s.whatsapp.net',
  pushName: 'Sandbox',
});

/** A lifecycle over stored credentials whose first read waits for `release`, and the events it emitted. */
function heldLifecycle() {
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let reads = 0;
  const values = new Map<string, string>([['creds/self', CREDS]]);
  const events: EngineEvent[] = [];
  const context = {
    instanceId: 'sandbox-generation',
    env: 'test',
    clock: () => Date.now(),
    logger: pino({ level: 'silent' }),
    emit: async (event: EngineEvent) => void events.push(event),
    auth: {
      async get(category: string, ids: readonly string[]) {
        reads += 1;
        if (reads === 1) await held;
        const answer = new Map<string, string>();
        for (const id of ids) {
          const value = values.get(`${category}/${id}`);
          if (value !== undefined) answer.set(id, value);
        }
        return answer;
      },
      async set(entries: readonly AuthEntry[]) {
        for (const { category, id, value } of entries) {
          if (value === null) values.delete(`${category}/${id}`);
          else values.set(`${category}/${id}`, value);
        }
      },
      list: async () => new Map<string, string>(),
      clear: async () => values.clear(),
    },
  } as unknown as EngineSessionContext;
  return { lifecycle: new SandboxLifecycle(context), release, events };
}

/** The `connected` flags of the `connection` events, in order. */
function connections(events: readonly EngineEvent[]): boolean[] {
  return events.flatMap((event) => (event.type === 'connection' ? [event.state.connected] : []));
}

describe('sandbox: a connect reading its credentials across a disconnect, logout or close', () => {
  const cases = [
    {
      name: 'a disconnect that ends first leaves the session disconnected, still logged in',
      end: (lifecycle: SandboxLifecycle) => lifecycle.disconnect(),
      state: [false, true],
      emitted: [false],
    },
    {
      name: 'a logout that ends first leaves the session logged out',
      end: (lifecycle: SandboxLifecycle) => lifecycle.logout(),
      state: [false, false],
      emitted: [false],
    },
    {
      name: 'a close (shutdown, hand-over) meanwhile leaves it closed, with no event',
      end: async (lifecycle: SandboxLifecycle) => lifecycle.close(),
      state: [false, true],
      emitted: [],
    },
  ];
  for (const { name, end, state, emitted } of cases) {
    it(`${name}; the connect opens nothing`, async () => {
      const { lifecycle, release, events } = heldLifecycle();
      const connecting = lifecycle.connect();
      await end(lifecycle);
      release();
      await connecting;
      assert.deepEqual([lifecycle.state().connected, lifecycle.state().loggedIn], state);
      assert.deepEqual(connections(events), emitted, 'the connection events, in order');
    });
  }

  it('a connect alone opens the stored login', async () => {
    const { lifecycle, release, events } = heldLifecycle();
    const connecting = lifecycle.connect();
    release();
    await connecting;
    assert.deepEqual([lifecycle.state().connected, lifecycle.state().loggedIn], [true, true]);
    assert.deepEqual(connections(events), [true]);
  });
});
