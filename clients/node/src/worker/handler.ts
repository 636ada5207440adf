/**
 * What a worker runs: the {@link Handler} and its {@link JobContext}, the errors with which a
 * handler chooses its job's outcome ({@link PermanentError}, {@link RetryError}), and how a
 * handler's result becomes a settlement.
 *
 * @module
 */

import { Buffer } from "node:buffer";

import type { Delivery, Job } from "../job.js";

/**
 * Handles one job. Returning (or resolving) acks it; throwing (or rejecting) nacks it, so
 * the server retries it after the job's back-off, or sends it to dead after its last
 * attempt; a {@link PermanentError} buries it at once, a {@link RetryError} retries it after
 * the delay it names.
 */
export type Handler = (job: Job, context: JobContext) => unknown;

/** What a handler knows about its delivery besides the job. */
export interface JobContext {
  /**
   * Aborted when the handler should stop: its lease was lost (the reason is a
   * `LeaseLostError`, `NotFoundError` after a delete, or `WrongStateError`; whatever the
   * handler does next is not settled), or the worker's shutdown timeout is over (the reason
   * is a {@link ShutdownError}; the job is given back to the server). Pass it to `fetch` and
   * other calls that take one.
   */
  readonly signal: AbortSignal;
  /** The delivery: its lease token, receipt and lateness. */
  readonly delivery: Delivery;
  /**
   * The attempt number of this delivery (1 for the first): the API's `attempts`, the same
   * as `job.attempts`.
   */
  readonly attempts: number;
  /**
   * The attempt number of this delivery.
   *
   * @deprecated Use {@link JobContext.attempts} (the API's name, and the `Job`'s); `attempt`
   * is an alias kept so that existing handlers run on, and warns once when read.
   */
  readonly attempt: number;
}

/** The context of one delivery, with `attempt` as a deprecated alias of `attempts`. */
export function jobContext(signal: AbortSignal, delivery: Delivery): JobContext {
  return {
    signal,
    delivery,
    attempts: delivery.job.attempts,
    get attempt(): number {
      warnAttempt();
      return delivery.job.attempts;
    },
  };
}

let warnedAttempt = false;

/** Warns once per process that `context.attempt` is deprecated. */
function warnAttempt(): void {
  if (!warnedAttempt) {
    warnedAttempt = true;
    process.emitWarning("JobContext.attempt is deprecated: use context.attempts (or job.attempts)", {
      type: "DeprecationWarning",
      code: "DELAYQ_ATTEMPT",
    });
  }
}

/** Thrown by a handler: the job cannot succeed; it goes to dead at once with the message as its reason. */
export class PermanentError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Thrown by a handler: retry the job after `delayMs` (instead of its back-off), if attempts are left. */
export class RetryError extends Error {
  /** The delay before the next attempt in ms; the job's back-off when absent. */
  readonly delayMs: number | undefined;

  constructor(message: string, options?: ErrorOptions & { readonly delayMs?: number }) {
    super(message, options);
    this.name = new.target.name;
    this.delayMs = options?.delayMs;
  }
}

/** The reason a job's signal is aborted with when the worker's shutdown timeout is over. */
export class ShutdownError extends Error {
  constructor() {
    super("the worker is shutting down and its shutdown timeout is over: the job is given back");
    this.name = new.target.name;
  }
}

/** How a handler's run ended. */
export type Outcome =
  | { readonly kind: "ack" }
  | { readonly kind: "nack"; readonly reason: string; readonly delayMs: number | undefined }
  | { readonly kind: "bury"; readonly reason: string };

/** The largest failure reason the server keeps, in bytes. */
export const MAX_REASON = 4096;

/** The outcome of a handler that threw `e`. */
export function failed(e: unknown): Outcome {
  const reason = cutReason(describe(e));
  if (e instanceof PermanentError) {
    return { kind: "bury", reason };
  }
  if (e instanceof RetryError) {
    return { kind: "nack", reason, delayMs: e.delayMs };
  }
  return { kind: "nack", reason, delayMs: undefined };
}

function describe(e: unknown): string {
  if (e instanceof Error) {
    return e.message === "" ? e.name : e.message;
  }
  return `handler threw ${String(e)}`;
}

/** `reason` within the server's 4 KiB, cut at a character boundary, with `...` when cut. */
export function cutReason(reason: string): string {
  const bytes = Buffer.from(reason, "utf8");
  if (bytes.length <= MAX_REASON) {
    return reason;
  }
  // Decoding a cut sequence yields U+FFFD (3 bytes); drop it, then the marker fits.
  let cut = bytes.subarray(0, MAX_REASON - 3).toString("utf8");
  if (cut.endsWith("\uFFFD")) {
    cut = cut.slice(0, -1);
  }
  while (Buffer.byteLength(cut, "utf8") > MAX_REASON - 3) {
    cut = cut.slice(0, -1);
  }
  return `${cut}...`;
}
