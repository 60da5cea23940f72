/**
 * The reach-out timelock's rule in the simulator's model (sim/model/restrictions.ts): while it is active, a
 * message to a user the account has no 1:1 chat with is refused (463); a 1:1 message either way makes a chat, a
 * message in a group they share does not.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Accounts, phoneJid } from '../../sim/model/accounts.ts';
import { nackFor } from '../../sim/model/restrictions.ts';

function world() {
  const accounts = new Accounts();
  const shop = accounts.create({ phone: '5511940000101' });
  const bruno = accounts.create({ phone: '5511940000102' });
  const now = Date.now();
  shop.restrictions = { ...shop.restrictions, reachoutUntil: now + 60_000 };
  return { accounts, shop, bruno, now };
}

const entry = (from: string, extra: { group?: string; type?: string } = {}) => ({
  id: `m${Math.random()}`,
  from,
  fromDevice: 1,
  type: extra.type ?? 'text',
  timestamp: new Date().toISOString(),
  text: 'hi',
  ...(extra.group ? { group: extra.group } : {}),
});

describe('simulator reach-out timelock rule', () => {
  it('refuses a first message to a user without a 1:1 chat, and takes it when the lock is over', () => {
    const { accounts, shop, bruno, now } = world();
    assert.equal(nackFor(accounts, shop, phoneJid(bruno.phone), now), 463);
    assert.equal(nackFor(accounts, shop, phoneJid(bruno.phone), now + 120_000), undefined);
  });

  it('a message in a shared group is not a chat; a 1:1 message from the account is', () => {
    const { accounts, shop, bruno, now } = world();
    bruno.inbox.push(entry(shop.phone, { group: '120363000000000001@g.us' }));
    bruno.inbox.push(entry(shop.phone, { type: 'receipt' }));
    assert.equal(nackFor(accounts, shop, phoneJid(bruno.phone), now), 463);
    bruno.inbox.push(entry(shop.phone));
    assert.equal(nackFor(accounts, shop, phoneJid(bruno.phone), now), undefined);
  });
});
