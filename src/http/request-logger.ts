import type { FastifyBaseLogger } from 'fastify';
import pino, { type Bindings, type ChildLoggerOptions, type Level, type LevelWithSilentOrString } from 'pino';

/** pino's numeric value of a level name; `silent` and unknown names rank above every level. */
function rank(level: LevelWithSilentOrString): number {
  return pino.levels.values[level] ?? Number.POSITIVE_INFINITY;
}

/**
 * A request's logger, made by Fastify's `childLoggerFactory` for every request: the pino child that carries the
 * request's bindings (its id, `reqId`) is made only when the request writes its first line at a level the logger
 * writes. At the levels a busy service runs at (`warn`), most requests write none, and making a pino child for each
 * one serialises its bindings for nothing (docs/benchmarks.md step 55: 0.7–0.8 µs a request measured alone, about
 * 1 % of a send run's profile). What is written is the same as with an eager child: the same bindings, options and
 * serializers, at the level chosen for the route.
 */
export class RequestLogger implements FastifyBaseLogger {
  readonly #parent: FastifyBaseLogger;
  readonly #bindings: Bindings;
  readonly #options: ChildLoggerOptions;
  #child: FastifyBaseLogger | undefined;

  /**
   * @param parent the app's logger.
   * @param bindings what every line of the request carries (Fastify passes `{ reqId }`).
   * @param options the child's options (Fastify passes the route's `logLevel` as `level` when it has one).
   */
  constructor(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
  }

  /** The pino child, made at the first call that needs it. */
  #logger(): FastifyBaseLogger {
    this.#child ??= this.#parent.child(this.#bindings, this.#options);
    return this.#child;
  }

  #write(level: Level, args: unknown[]): void {
    if (rank(level) < rank(this.level)) return;
    const logger = this.#logger();
    Reflect.apply(logger[level], logger, args);
  }

  /** The level lines are written from: the child's once made, else the route's, else the app logger's. */
  get level(): LevelWithSilentOrString {
    return this.#child?.level ?? this.#options.level ?? this.#parent.level;
  }

  /** Sets the request's level (on its child, made for it). */
  set level(level: LevelWithSilentOrString) {
    this.#logger().level = level;
  }

  /** pino's `fatal`, with the request's bindings. */
  fatal(...args: unknown[]): void {
    this.#write('fatal', args);
  }

  /** pino's `error`, with the request's bindings. */
  error(...args: unknown[]): void {
    this.#write('error', args);
  }

  /** pino's `warn`, with the request's bindings. */
  warn(...args: unknown[]): void {
    this.#write('warn', args);
  }

  /** pino's `info`, with the request's bindings. */
  info(...args: unknown[]): void {
    this.#write('info', args);
  }

  /** pino's `debug`, with the request's bindings. */
  debug(...args: unknown[]): void {
    this.#write('debug', args);
  }

  /** pino's `trace`, with the request's bindings. */
  trace(...args: unknown[]): void {
    this.#write('trace', args);
  }

  /** pino's `silent`: writes nothing. */
  silent(..._args: unknown[]): void {}

  /** A child of the request's logger (its bindings and the new ones). */
  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#logger().child(bindings, options);
  }
}

/**
 * Fastify's `childLoggerFactory` making a {@link RequestLogger} per request.
 * @returns a logger whose pino child is made at its first written line.
 */
export function requestLoggerFactory(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  return new RequestLogger(logger, bindings, options);
}
