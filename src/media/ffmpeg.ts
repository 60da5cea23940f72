import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { DomainError } from '../domain/errors.ts';

/** Time allowed for one ffmpeg run, milliseconds. */
export const FFMPEG_TIMEOUT_MS = 60_000;

/**
 * The ffmpeg binary shipped by the optional dependency `@ffmpeg-installer/ffmpeg` for this platform, or undefined
 * when the package (or its per-platform binary package) is not installed. The package throws a string on an
 * unsupported platform or a missing binary; both mean "not packaged".
 */
export function packagedFfmpegPath(): string | undefined {
  try {
    const loaded: unknown = createRequire(import.meta.url)('@ffmpeg-installer/ffmpeg');
    if (
      typeof loaded === 'object' &&
      loaded !== null &&
      'path' in loaded &&
      typeof loaded.path === 'string'
    ) {
      return loaded.path;
    }
  } catch {
    // not installed (optional dependency skipped) or no binary for this platform
  }
  return undefined;
}

/**
 * The binaries tried for ffmpeg, in order: `configured` (config `FFMPEG_PATH`) alone when set — an explicit
 * choice is never second-guessed; otherwise the packaged binary (see {@link packagedFfmpegPath}) and then
 * `ffmpeg` found on `PATH`.
 */
export function ffmpegCandidates(configured: string | undefined): string[] {
  if (configured !== undefined && configured !== '') return [configured];
  const packaged = packagedFfmpegPath();
  return packaged === undefined ? ['ffmpeg'] : [packaged, 'ffmpeg'];
}

/** True when `<path> -version` runs and exits 0 within 10 s. */
function runs(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    execFile(path, ['-hide_banner', '-version'], { timeout: 10_000 }, (error) => resolve(!error));
  });
}

/**
 * The `ffmpeg` dependency (animated stickers, docs/decisions/0017-messages-and-media.md). The binary is the first of
 * {@link ffmpegCandidates} that runs: `FFMPEG_PATH` when configured, else the packaged binary, else `ffmpeg` on
 * `PATH`. Which one runs is checked once, on first use, and remembered.
 */
export class Ffmpeg {
  /** The binaries tried, in order. */
  readonly candidates: readonly string[];
  #resolved: Promise<string | undefined> | undefined;

  /** @param path the configured binary (`FFMPEG_PATH`); undefined or empty: packaged, then `PATH`. */
  constructor(path?: string) {
    this.candidates = ffmpegCandidates(path);
  }

  /** The binary in use: the first candidate that runs, or undefined when none does. */
  resolve(): Promise<string | undefined> {
    this.#resolved ??= (async () => {
      for (const candidate of this.candidates) if (await runs(candidate)) return candidate;
      return undefined;
    })();
    return this.#resolved;
  }

  /** True when one of the candidates runs. */
  async available(): Promise<boolean> {
    return (await this.resolve()) !== undefined;
  }

  /**
   * Runs ffmpeg with `args` (no shell), failing after {@link FFMPEG_TIMEOUT_MS}.
   * @throws DomainError not_ready (503) naming the missing dependency when ffmpeg is not installed;
   *   invalid `<field> could not be converted: …` when ffmpeg fails on the input.
   */
  async run(args: readonly string[], field: string): Promise<void> {
    const path = await this.require();
    await new Promise<void>((resolve, reject) => {
      execFile(
        path,
        ['-hide_banner', '-loglevel', 'error', '-nostdin', ...args],
        { timeout: FFMPEG_TIMEOUT_MS, maxBuffer: 1024 * 1024 },
        (error, _stdout, stderr) => {
          if (!error) return resolve();
          const detail = String(stderr).trim().split('\n').at(-1) ?? '';
          reject(
            new DomainError(
              'invalid',
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

  /**
   * @returns the binary in use.
   * @throws DomainError not_ready (503) naming the missing dependency and every binary tried when none runs.
   */
  async require(): Promise<string> {
    const path = await this.resolve();
    if (path !== undefined) return path;
    const tried = this.candidates.map((c) => `"${c}"`).join(', ');
    throw new DomainError(
      'not_ready',
      `animated stickers need ffmpeg, which is not installed on this server (install ffmpeg or set FFMPEG_PATH; tried ${tried})`,
    );
  }
}
