/**
 * Copies of plain objects with fields added or replaced, built so that V8 shares their hidden classes.
 *
 * An object literal that starts with the spread of a non-empty object and goes on with keys of its own
 * (`{ ...base, extra: 1 }`) gets a hidden class (a "map") of its own at every evaluation on the V8 of Node 20: the
 * spread's copy has a map outside any transition tree, so each added key makes a new map, which costs about 0.6 µs
 * an added key and turns every property read of the result megamorphic (docs/decisions/0071-shared-object-shapes.md,
 * measured there). `Object.assign` onto a fresh `{}` follows the empty object's transitions and shares maps.
 */

/**
 * `{ ...base, ...extra }` as a new object: `base`'s own enumerable keys in their order, then `extra`'s, an `extra`
 * key replacing `base`'s value in place. Both must be parley's own objects: `Object.assign` sets through accessors,
 * so an own `__proto__` key (as `JSON.parse` makes from untrusted text) would set the copy's prototype.
 */
export function extended<B extends object, E extends object>(base: B, extra: E): Omit<B, keyof E> & E {
  return Object.assign({}, base, extra);
}
