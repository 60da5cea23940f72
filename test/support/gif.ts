/**
 * A GIF89a of `frames` frames, each one pixel (alternately black and white) on a `width` × `height` logical screen,
 * with a global two-colour table and a looping NETSCAPE extension: about 23 bytes a frame, however large the screen.
 * The first frame sits in the screen's bottom-right corner (libvips sizes a GIF by the area its frames cover) and
 * decoders composite every frame to that whole area, so it decodes to width × height × frames pixels; the sticker
 * suites use it to reach the conversion budget, the image suites the pixel budget of a sent image
 * (docs/decisions/0017-messages-and-media.md), with a few bytes.
 */
export function pixelFramesGif(frames: number, width: number, height: number): Buffer {
  const screen = Buffer.alloc(7);
  screen.writeUInt16LE(width, 0);
  screen.writeUInt16LE(height, 2);
  screen[4] = 0x80; // a global colour table of 2 entries
  const parts = [
    Buffer.from('GIF89a', 'ascii'),
    screen,
    Buffer.from([0, 0, 0, 255, 255, 255]),
    Buffer.from([0x21, 0xff, 0x0b, ...Buffer.from('NETSCAPE2.0'), 0x03, 0x01, 0x00, 0x00, 0x00]),
  ];
  for (let i = 0; i < frames; i++) {
    parts.push(Buffer.from([0x21, 0xf9, 0x04, 0x04, 0x02, 0x00, 0x00, 0x00])); // 20 ms a frame
    const descriptor = Buffer.alloc(10);
    descriptor[0] = 0x2c;
    descriptor.writeUInt16LE(width - 1 - (i % width), 1);
    descriptor.writeUInt16LE(height - 1 - (Math.floor(i / width) % height), 3);
    descriptor.writeUInt16LE(1, 5);
    descriptor.writeUInt16LE(1, 7);
    parts.push(descriptor);
    // LZW, minimum code size 2: clear (4), the pixel's index, end (5), as 3-bit codes.
    const codes = 4 | ((i % 2) << 3) | (5 << 6);
    parts.push(Buffer.from([0x02, 0x02, codes & 0xff, (codes >> 8) & 0xff, 0x00]));
  }
  parts.push(Buffer.from([0x3b]));
  return Buffer.concat(parts);
}
