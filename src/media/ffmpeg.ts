import { execFile } from 'node:child_process';
import { ApiError } from '../errors.ts';

/** Time allowed for one ffmpeg run, milliseconds. */
export const FFMPEG_TIMEOUT_MS = 60_000;

/**
 * The `ffmpeg` system dependency (animated stickers, DESIGN D8). The binary is `path` (config `FFMPEG_PATH`)
 * or `ffmpeg` found on `PATH`; whether it runs is checked once, on first use, and remembered.
 */
export class Ffmpeg {
  readonly path: string;
  #available: Promise<boolean> | undefined;

  constructor(path?: string) {
    this.path = path === undefined || path === '' ? 'ffmpeg' : path;
  }

  /** True when `<path> -version` runs and exits 0. */
  available(): Promise<boolean> {
    this.#available ??= new Promise((resolve) => {
      execFile(this.path, ['-hide_banner', '-version'], { timeout: 10_000 }, (error) => resolve(!error));
    });
    return this.#available;
  }

  /**
   * Runs ffmpeg with `args` (no shell), failing after {@link FFMPEG_TIMEOUT_MS}.
   * @throws ApiError NOT_READY (503) naming the missing dependency when ffmpeg is not installed;
   *   BAD_REQUEST `<field> could not be converted: …` when ffmpeg fails on the input.
   */
  async run(args: readonly string[], field: string): Promise<void> {
    await this.require();
    await new Promise<void>((resolve, reject) => {
      execFile(
        this.path,
        ['-hide_banner', '-loglevel', 'error', '-nostdin', ...args],
        { timeout: FFMPEG_TIMEOUT_MS, maxBuffer: 1024 * 1024 },
        (error, _stdout, stderr) => {
          if (!error) return resolve();
          const detail = String(stderr).trim().split('\n').at(-1) ?? '';
          reject(
            new ApiError(
              'BAD_REQUEST',
              `${field} could not be converted${detail ? `: ${detail.slice(0, 200)}` : ''}`,
              {
                cause: error,
              },
            ),
          );
        },
      );
    });
  }

  /** @throws ApiError NOT_READY (503) naming the missing dependency when ffmpeg cannot be run. */
  async require(): Promise<void> {
    if (await this.available()) return;
    throw new ApiError(
      'NOT_READY',
      `animated stickers need ffmpeg, which is not installed on this server (install ffmpeg or set FFMPEG_PATH; tried "${this.path}")`,
    );
  }
}
