/**
 * Channel metadata as the platform answers it (GraphQL shape, which Baileys 7's newsletterMetadata passes on) read
 * into parley's channels, and invite links reduced to codes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { channelInviteCode } from '../../src/domain/channels.ts';
import { channelOf } from '../../src/engines/baileys/channels.ts';

describe('live engine: channels', () => {
  it('reads the platform metadata: name and description texts, invite, follower count', () => {
    assert.deepEqual(
      channelOf({
        id: '120363000000000001@newsletter',
        state: { type: 'ACTIVE' },
        thread_metadata: {
          name: { text: 'Shop News' },
          description: { text: '' },
          invite: '0029VaShopNews',
          subscribers_count: '42',
        },
        viewer_metadata: { mute: 'OFF', role: 'SUBSCRIBER' },
      }),
      { jid: '120363000000000001@newsletter', name: 'Shop News', subscribers: 42, invite: '0029VaShopNews' },
    );
    assert.deepEqual(
      channelOf({ id: '1@newsletter', name: 'Flat', description: 'Parsed', subscribers: 3 }),
      { jid: '1@newsletter', name: 'Flat', description: 'Parsed', subscribers: 3 },
      "Baileys' parsed shape too",
    );
    assert.equal(channelOf(null), null);
    assert.equal(channelOf({ thread_metadata: {} }), null, 'no id');
  });

  it('takes invite codes and https://whatsapp.com/channel/<code> links, nothing else', () => {
    assert.equal(channelInviteCode('0029VaShopNews'), '0029VaShopNews');
    assert.equal(channelInviteCode('https://whatsapp.com/channel/0029VaShopNews'), '0029VaShopNews');
    assert.equal(
      channelInviteCode('https://www.whatsapp.com/channel/0029VaShopNews/?lang=en'),
      '0029VaShopNews',
    );
    assert.equal(channelInviteCode('https://example.com/channel/0029VaShopNews'), null);
    assert.equal(channelInviteCode('http://whatsapp.com/channel/0029VaShopNews'), null);
    assert.equal(channelInviteCode('bad code!'), null);
  });
});
