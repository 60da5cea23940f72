/**
 * A LID↔phone pair the live engine learns is taken as told only once its `lid-mapping` event is recorded
 * (docs/decisions/0038-lid-mappings.md, docs/decisions/0024-engines-and-data-flow.md): a pair whose event the store
 * refused is recorded the next time the platform teaches it (a stanza's alternate field, a mapping update).
 * Held as told before its event, the pair was never recorded again while the session ran: the JID resolver kept it
 * in memory and told nobody, so the store never learned it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EngineEvent } from '../../src/domain/messages.ts';
import { JidResolver } from '../../src/engines/baileys/jid.ts';
import { LearnedLids } from '../../src/engines/baileys/lids.ts';
import { IncomingQueue } from '../../src/engines/baileys/listeners.ts';
import type { EngineSessionContext } from '../../src/engines/engine.ts';
import { noEmitWith, silentLogger } from './support.ts';

const LID = '204981234567890';
const PHONE = '5511988887777';

/** A session's queue, learned pairs and resolver wired as the live session wires them, over `emit`. */
function wired(emit: (event: EngineEvent) => Promise<void>) {
  const context: EngineSessionContext = {
    instanceId: 'i',
    env: 'live',
    auth: {} as never,
    emit,
    emitWith: noEmitWith,
    findMessage: async () => undefined,
    logger: silentLogger(),
    clock: () => 0,
  };
  const queue = new IncomingQueue(context);
  const holder: { resolver?: JidResolver } = {};
  const learned = new LearnedLids(queue, (mappings) => holder.resolver?.untold(mappings));
  const resolver = new JidResolver({ onLearned: (mapping) => learned.add(mapping) });
  holder.resolver = resolver;
  return { queue, resolver };
}

describe('live engine: a learned LID pair is told once its lid-mapping event is recorded', () => {
  it('a pair whose event the store refused is recorded when the platform teaches it again; then once', async () => {
    const recorded: EngineEvent[] = [];
    let refusing = true;
    const { queue, resolver } = wired(async (event) => {
      if (refusing) throw new Error('refused');
      recorded.push(event);
    });
    const taught = () => resolver.resolve(`${LID}@lid`, `${PHONE}@s.whatsapp.net`);
    assert.deepEqual(await taught(), { jid: `${PHONE}@s.whatsapp.net`, resolved: true });
    await queue.drained();
    assert.deepEqual(recorded, []);
    refusing = false;
    assert.deepEqual(
      await resolver.resolve(`${LID}@lid`),
      { jid: `${PHONE}@s.whatsapp.net`, resolved: true },
      'still resolved from memory',
    );
    await taught();
    await queue.drained();
    const event: EngineEvent = { type: 'lid-mapping', mappings: [{ lid: LID, phone: PHONE }] };
    assert.deepEqual(recorded, [event]);
    await taught();
    resolver.remember(`${LID}@lid`, `${PHONE}@s.whatsapp.net`);
    await queue.drained();
    assert.deepEqual(recorded, [event], 'a pair recorded is told once');
  });
});
