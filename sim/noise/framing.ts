/**
 * Frame layer of the platform's web protocol, as Baileys' Utils/noise-handler.js writes it (encodeFrame) and
 * reads it (decodeFrame): every frame is a 3-byte big-endian length followed by that many bytes. The client's
 * very first write is prefixed by an intro: the 4-byte `WA` header (`W`, `A`, 6, dictionary version) or, when
 * it holds routing info, `ED`, 0, 1, a 3-byte length, the routing info, then the `WA` header. Server frames
 * carry no intro.
 */
import { NOISE_WA_HEADER } from 'baileys';

/** Largest frame body the 3-byte length can express, in bytes. */
export const MAX_FRAME_BYTES = 0xffffff;

/** Prefixes `body` with its 3-byte length. Throws RangeError past {@link MAX_FRAME_BYTES}. */
export function encodeFrame(body: Uint8Array): Buffer {
  if (body.length > MAX_FRAME_BYTES) throw new RangeError(`frame of ${body.length} bytes exceeds 16 MiB`);
  const out = Buffer.allocUnsafe(3 + body.length);
  out[0] = (body.length >>> 16) & 0xff;
  out[1] = (body.length >>> 8) & 0xff;
  out[2] = body.length & 0xff;
  out.set(body, 3);
  return out;
}

/**
 * Accumulates WebSocket messages and yields complete frame bodies. The first bytes must be the intro; a
 * wrong intro raises `Error('framing: …')` from {@link push}.
 */
export class FrameReader {
  private buffer: Buffer = Buffer.alloc(0);
  private introRead = false;

  /** Appends received bytes and returns every frame body now complete, in order. */
  push(data: Uint8Array): Buffer[] {
    this.buffer = this.buffer.length === 0 ? Buffer.from(data) : Buffer.concat([this.buffer, data]);
    if (!this.introRead && !this.readIntro()) return [];
    const frames: Buffer[] = [];
    while (this.buffer.length >= 3) {
      const size = (this.buffer[0] ?? 0) * 65536 + (this.buffer[1] ?? 0) * 256 + (this.buffer[2] ?? 0);
      if (this.buffer.length < size + 3) break;
      frames.push(this.buffer.subarray(3, size + 3));
      this.buffer = this.buffer.subarray(size + 3);
    }
    return frames;
  }

  /** Consumes the intro when enough bytes are there; false when more are needed. */
  private readIntro(): boolean {
    let offset = 0;
    if (this.buffer.subarray(0, 2).toString('latin1') === 'ED') {
      if (this.buffer.length < 7) return false;
      const routingLength = (this.buffer[4] ?? 0) * 65536 + this.buffer.readUInt16BE(5);
      offset = 7 + routingLength;
    }
    if (this.buffer.length < offset + NOISE_WA_HEADER.length) return false;
    const header = this.buffer.subarray(offset, offset + NOISE_WA_HEADER.length);
    if (!header.equals(NOISE_WA_HEADER)) {
      throw new Error(
        `framing: expected intro header ${NOISE_WA_HEADER.toString('hex')}, got ${header.toString('hex')}`,
      );
    }
    this.buffer = this.buffer.subarray(offset + NOISE_WA_HEADER.length);
    this.introRead = true;
    return true;
  }
}
