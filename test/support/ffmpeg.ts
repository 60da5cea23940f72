import { Ffmpeg } from '../../src/media/ffmpeg.ts';

/**
 * Whether ffmpeg runs on this machine the way the server finds it with no `FFMPEG_PATH` (the packaged binary of
 * the optional dependency, else `ffmpeg` on PATH). Tests that convert video register only when it does;
 * scripts/test.js prints "not run: …" otherwise.
 */
export const ffmpegAvailable: boolean = await new Ffmpeg().available();
