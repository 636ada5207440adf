/**
 * The worker's options ({@link WorkerOptions}), their defaults, and their check: a value out
 * of range is a `RangeError` that names the option when the worker is built.
 *
 * @module
 */

import { Client } from "../client.js";
import type { ClientOptions } from "../http.js";
import { consoleLogger, type Logger } from "../log.js";

/** How a {@link Worker} runs. Every field is optional. */
export interface WorkerOptions {
  /** The server: a {@link Client}, or the options of one (default: `new Client()`, from `$DELAYQ_SERVER`). */
  readonly client?: Client | ClientOptions;
  /** The most handlers running at once (default 10; 1 to 10,000). */
  readonly concurrency?: number;
  /**
   * The most jobs held beyond the running ones, waiting for a free handler (default: the
   * concurrency, at least 50; 0 to 10,000). How many the worker actually holds adapts to about
   * 100 ms of work at its handlers' speed, and falls back when reserves come back short.
   */
  readonly prefetch?: number;
  /** How long one reserve waits for a job when there is none, in ms (default 30,000; the server may cut it). */
  readonly waitMs?: number;
  /** How long shutdown waits for running handlers before it gives their jobs back, in ms (default 20,000). */
  readonly shutdownTimeoutMs?: number;
  /** When a running handler's lease is renewed, as a fraction of the ttr (default 0.5; 0.1 to 0.75). */
  readonly renewFraction?: number;
  /** The least share of its lease a buffered job keeps; below it, while every handler is busy, it is given back (default 0.5). */
  readonly minLeaseLeft?: number;
  /** The first pause after a failed call, in ms (default 100); it doubles, with jitter, up to `retryMaxMs`. */
  readonly retryInitialMs?: number;
  /** The longest pause between calls while the server is unreachable or unavailable, in ms (default 5,000). */
  readonly retryMaxMs?: number;
  /** Where the worker logs (default {@link consoleLogger}`("warn")`). */
  readonly logger?: Logger;
}

/** The least default prefetch: enough jobs per reserve that round trips do not bound throughput. */
const DEFAULT_PREFETCH = 50;

/** The worker's settings: its options checked, with their defaults. */
export interface Settings {
  readonly client: Client;
  readonly logger: Logger;
  readonly concurrency: number;
  readonly prefetch: number;
  readonly waitMs: number;
  readonly shutdownTimeoutMs: number;
  readonly renewFraction: number;
  readonly minLeaseLeft: number;
  readonly retryInitialMs: number;
  readonly retryMaxMs: number;
}

/** `options` checked, with the defaults of what they leave out. */
export function settings(options: WorkerOptions): Settings {
  const concurrency = integer("concurrency", options.concurrency ?? 10, 1, 10_000);
  const retryInitialMs = integer("retryInitialMs", options.retryInitialMs ?? 100, 1, 60_000);
  return {
    client: options.client instanceof Client ? options.client : new Client(options.client),
    logger: options.logger ?? consoleLogger("warn"),
    concurrency,
    prefetch: integer("prefetch", options.prefetch ?? Math.max(concurrency, DEFAULT_PREFETCH), 0, 10_000),
    waitMs: integer("waitMs", options.waitMs ?? 30_000, 1, 3_600_000),
    shutdownTimeoutMs: integer("shutdownTimeoutMs", options.shutdownTimeoutMs ?? 20_000, 0, 3_600_000),
    renewFraction: fraction("renewFraction", options.renewFraction ?? 0.5, 0.1, 0.75),
    minLeaseLeft: fraction("minLeaseLeft", options.minLeaseLeft ?? 0.5, 0.05, 0.9),
    retryInitialMs,
    retryMaxMs: integer("retryMaxMs", options.retryMaxMs ?? 5_000, retryInitialMs, 600_000),
  };
}

function integer(name: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`worker option ${name} must be a whole number from ${min} to ${max}, not ${value}`);
  }
  return value;
}

function fraction(name: string, value: number, min: number, max: number): number {
  if (!(value >= min && value <= max)) {
    throw new RangeError(`worker option ${name} must be a number from ${min} to ${max}, not ${value}`);
  }
  return value;
}
