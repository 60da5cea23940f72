import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RequestPlaces, windowShares } from '../../src/webhooks/request-places.ts';

/**
 * The places for windows shared among the lanes of one claim (docs/decisions/0090-window-places-shared.md): as many
 * as a window can use or an even share, whichever is less, what a small window leaves going to the others.
 */
describe('window shares', () => {
  it('splits evenly, the first windows filled taking the one place that does not divide', () => {
    assert.deepEqual(windowShares([7, 7, 7], 6), [2, 2, 2]);
    assert.deepEqual(windowShares([7, 7, 7], 7), [3, 2, 2]);
    assert.deepEqual(
      windowShares([63, 63, 63, 63, 63, 63, 63, 63, 63, 63], 192),
      [20, 20, 19, 19, 19, 19, 19, 19, 19, 19],
    );
  });

  it('gives what a small window cannot use to the others, in the order the demands came', () => {
    assert.deepEqual(windowShares([7, 1, 1], 6), [4, 1, 1]);
    assert.deepEqual(
      windowShares([63, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], 192),
      [63, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
    );
    assert.deepEqual(windowShares([0, 5, 2], 4), [0, 2, 2]);
    assert.deepEqual(windowShares([-3, 4], 3), [0, 3], 'a negative demand counts as none');
  });

  it('never gives more than is free nor more than a window can use', () => {
    assert.deepEqual(windowShares([3, 3], 100), [3, 3]);
    assert.deepEqual(windowShares([3, 3], 0), [0, 0]);
    assert.deepEqual(windowShares([3, 3], -2), [0, 0]);
    assert.deepEqual(windowShares([], 10), []);
    for (let free = 0; free <= 40; free++) {
      const demands = [9, 0, 4, 17, 1, 6];
      const shares = windowShares(demands, free);
      const total = shares.reduce((sum, share) => sum + share, 0);
      assert.equal(total, Math.min(free, 37), `all of ${free} places used while a window wants more`);
      // Max-min fair: a window short of its demand has at least every other window's share less one.
      const most = Math.max(...shares);
      for (const [index, share] of shares.entries()) {
        const demand = demands[index] ?? 0;
        assert.ok(share <= demand, `${shares} for ${free}: over a demand`);
        if (share < demand) assert.ok(share >= most - 1, `${shares} for ${free}: not fair`);
      }
    }
  });

  it('a share taken from the places still leaves those kept for first requests', () => {
    const places = new RequestPlaces(9);
    places.hold(3);
    const [share] = windowShares([7], places.free - 2);
    assert.equal(share, 4);
    assert.equal(places.take(share ?? 0, 2), 4);
    assert.equal(places.free, 2);
  });
});
