/**
 * Holds the calls of an async method until the test lets them go, to stop a request at a known point (a stream's
 * position check, an instance's read) while something else happens, such as the server's close.
 *
 * `method` is the method as it is (bound to its object); `install` puts the holding version in its place. → `held`,
 * which resolves once a call waits, and `release`, which lets every waiting and later call go on to `method`.
 */
export function holdCalls<A extends unknown[], R>(
  method: (...args: A) => Promise<R>,
  install: (holding: (...args: A) => Promise<R>) => void,
): { held: Promise<void>; release: () => void } {
  let arrived = () => {};
  const held = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  let release = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  install(async (...args) => {
    arrived();
    await gate;
    return method(...args);
  });
  return { held, release };
}
