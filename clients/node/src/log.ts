/**
 * The worker's log: a small {@link Logger} interface that any logger (pino, winston,
 * `console`) fits with a line of glue, and {@link consoleLogger}, the default.
 *
 * @module
 */

/** Structured facts about a log event (`topic`, `id`, `error` ...). */
export type LogFields = Readonly<Record<string, unknown>>;

/** Where the worker reports what it does. */
export interface Logger {
  /** Routine detail (each job done). */
  debug(message: string, fields?: LogFields): void;
  /** Lifecycle events (shutdown, jobs given back). */
  info(message: string, fields?: LogFields): void;
  /** Something went wrong and is being handled (a retry, a lost lease, the server unreachable). */
  warn(message: string, fields?: LogFields): void;
  /** Something went wrong that someone should look at (a job sent to dead, an outcome not recorded). */
  error(message: string, fields?: LogFields): void;
}

/** The levels of {@link consoleLogger}, least severe first. */
export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";

const RANK: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3, silent: 4 };

/**
 * A logger that writes one line per event at `level` or above to standard error:
 * `delayq worker: <message> {"topic":…}`. The worker's default is `warn`.
 */
export function consoleLogger(level: LogLevel = "warn"): Logger {
  const at = RANK[level];
  const write =
    (lvl: Exclude<LogLevel, "silent">) =>
    (message: string, fields?: LogFields): void => {
      if (RANK[lvl] < at) {
        return;
      }
      const facts = fields === undefined ? "" : ` ${JSON.stringify(fields, errorsAsText)}`;
      process.stderr.write(`delayq worker ${lvl}: ${message}${facts}\n`);
    };
  return { debug: write("debug"), info: write("info"), warn: write("warn"), error: write("error") };
}

function errorsAsText(_key: string, value: unknown): unknown {
  return value instanceof Error ? `${value.name}: ${value.message}` : value;
}
