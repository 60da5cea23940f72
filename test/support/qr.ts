/** Decoding the QR PNGs parley returns, to check they carry the pairing string. */
import assert from 'node:assert/strict';
import jsqrModule from 'jsqr';
import { PNG } from 'pngjs';

// jsqr is CommonJS whose module.exports is the decoder itself.
const jsQR = jsqrModule as unknown as typeof jsqrModule.default;

/**
 * The text a `data:image/png;base64,…` QR image encodes, or undefined when no QR code is found in it.
 * Fails the test when `dataUri` is not a PNG data URI.
 */
export function decodeQr(dataUri: string): string | undefined {
  assert.match(dataUri, /^data:image\/png;base64,/);
  const png = PNG.sync.read(Buffer.from(dataUri.slice('data:image/png;base64,'.length), 'base64'));
  return jsQR(new Uint8ClampedArray(png.data), png.width, png.height)?.data;
}
