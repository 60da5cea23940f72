/**
 * The live engine's JID resolver asks parley's kept phone↔LID pairs (`lid_mappings`) when its memory and Baileys'
 * mapping store do not know a LID (docs/decisions/0038-lid-mappings.md): a pair stored before a restart names its
 * user by phone JID, with no `lidUnresolved`; a LID parley keeps no pair for costs one store read per session; a
 * store that fails the read leaves the LID unresolved and is asked again the next time.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { JidResolver } from '../../src/engines/baileys/jid.ts';

describe('live engine: the JID resolver falls back on parley’s kept pairs', () => {
  it('a kept pair resolves the LID (remembered, not told again); Baileys’ store is asked first', async () => {
    const asked: string[] = [];
    const learned: unknown[] = [];
    const resolver = new JidResolver({
      lookup: () => ({
        getPNForLID: async (lid) => {
          asked.push(`baileys:${lid}`);
          return null;
        },
      }),
      kept: async (lid) => {
        asked.push(`kept:${lid}`);
        return lid === '111' ? '5511955554444' : undefined;
      },
      onLearned: (mapping) => learned.push(mapping),
    });
    assert.deepEqual(await resolver.resolve('111:3@lid'), {
      jid: '5511955554444@s.whatsapp.net',
      resolved: true,
    });
    assert.deepEqual(await resolver.resolve('111@lid'), {
      jid: '5511955554444@s.whatsapp.net',
      resolved: true,
    });
    assert.deepEqual(asked, ['baileys:111@lid', 'kept:111'], 'the second time from memory');
    assert.deepEqual(learned, [], 'a kept pair is stored already');
  });

  it('a LID with no kept pair is asked once, until its pair is remembered', async () => {
    let reads = 0;
    const resolver = new JidResolver({
      kept: async () => {
        reads += 1;
        return undefined;
      },
    });
    assert.deepEqual(await resolver.resolve('222@lid'), { jid: '222@lid', resolved: false });
    assert.deepEqual(await resolver.resolve('222@lid'), { jid: '222@lid', resolved: false });
    assert.equal(reads, 1);
    resolver.remember('222@lid', '5511944443333@s.whatsapp.net');
    assert.deepEqual(await resolver.resolve('222@lid'), {
      jid: '5511944443333@s.whatsapp.net',
      resolved: true,
    });
    assert.equal(reads, 1);
  });

  it('a failed read is reported and leaves the LID unresolved, asked again next time', async () => {
    const errors: string[] = [];
    let fail = true;
    const resolver = new JidResolver({
      kept: async () => {
        if (fail) throw new Error('store away');
        return '5511933332222';
      },
      onLookupError: (error, lid) => errors.push(`${lid}: ${(error as Error).message}`),
    });
    assert.deepEqual(await resolver.resolve('333@lid'), { jid: '333@lid', resolved: false });
    assert.deepEqual(errors, ['333@lid: store away']);
    fail = false;
    assert.deepEqual(await resolver.resolve('333@lid'), {
      jid: '5511933332222@s.whatsapp.net',
      resolved: true,
    });
  });

  it('resolveAll asks each store once for all the LIDs memory does not know, and answers as resolve would', async () => {
    const asked: string[] = [];
    const learned: unknown[] = [];
    const errors: string[] = [];
    const resolver = new JidResolver({
      lookup: () => ({
        getPNForLID: async () => assert.fail('asked one by one'),
        getPNsForLIDs: async (lids) => {
          asked.push(`baileys:${lids.join(',')}`);
          return lids.includes('444@lid') ? [{ lid: '444@lid', pn: '5511922221111:2@s.whatsapp.net' }] : null;
        },
      }),
      kept: async () => assert.fail('asked one by one'),
      keptMany: async (lids) => {
        asked.push(`kept:${lids.join(',')}`);
        return new Map([['555', '5511900001111']]);
      },
      onLearned: (mapping) => learned.push(mapping),
      onLookupError: (error, lid) => errors.push(`${lid}: ${(error as Error).message}`),
    });
    resolver.remember('111@lid', '5511955554444@s.whatsapp.net', false);
    const jids = ['111@lid', '444:3@lid', '5511933332222:1@s.whatsapp.net', '555@lid', '666@lid', '444@lid'];
    assert.deepEqual(await resolver.resolveAll(jids), [
      { jid: '5511955554444@s.whatsapp.net', resolved: true },
      { jid: '5511922221111@s.whatsapp.net', resolved: true },
      { jid: '5511933332222@s.whatsapp.net', resolved: true },
      { jid: '5511900001111@s.whatsapp.net', resolved: true },
      { jid: '666@lid', resolved: false },
      { jid: '5511922221111@s.whatsapp.net', resolved: true },
    ]);
    assert.deepEqual(asked, ['baileys:444@lid,555@lid,666@lid', 'kept:555,666']);
    assert.deepEqual(
      learned,
      [{ lid: '444', phone: '5511922221111' }],
      "only the socket store's pair is told",
    );
    // Again: the pairs found are remembered and 666 is known to have none; only the socket's store is asked for it.
    asked.length = 0;
    assert.deepEqual((await resolver.resolveAll(jids)).map((r) => r.jid).at(4), '666@lid');
    assert.deepEqual(asked, ['baileys:666@lid']);
    assert.deepEqual(errors, []);
  });

  it('resolveAll reports a failed read of the kept pairs for each LID asked, and asks again next time', async () => {
    const errors: string[] = [];
    let fail = true;
    const resolver = new JidResolver({
      keptMany: async (lids) => {
        if (fail) throw new Error('store away');
        return new Map(lids.map((lid) => [lid, `55119${lid}`]));
      },
      onLookupError: (error, lid) => errors.push(`${lid}: ${(error as Error).message}`),
    });
    assert.deepEqual(await resolver.resolveAll(['777@lid', '888@lid']), [
      { jid: '777@lid', resolved: false },
      { jid: '888@lid', resolved: false },
    ]);
    assert.deepEqual(errors, ['777@lid: store away', '888@lid: store away']);
    fail = false;
    assert.deepEqual(await resolver.resolveAll(['777@lid', '888@lid']), [
      { jid: '55119777@s.whatsapp.net', resolved: true },
      { jid: '55119888@s.whatsapp.net', resolved: true },
    ]);
  });
});
