/**
 * The window: how many jobs the worker holds leased at once (buffered or running), and so
 * how many its next reserve asks for.
 *
 * It aims at about {@link HORIZON_MS} of work at the handlers' observed speed, never below
 * the concurrency (every handler can have a job) and never above concurrency + prefetch. It
 * starts at the concurrency, doubles (up to that aim) each time a reserve comes back full,
 * and falls to what a reserve returned when one comes back short, so a worker on a short
 * queue leaves the rest to other workers. Slow handlers bring it down to the concurrency:
 * a job must not wait in the buffer for a handler longer than its lease allows.
 *
 * @module
 */

/** How far ahead the window looks, in ms of handler work. */
export const HORIZON_MS = 100;

/** The weight of the newest handler duration in the running average. */
const WEIGHT = 0.1;

/** The window of one worker. */
export class Window {
  private current: number;
  /** The running average of handler durations in ms; undefined before the first. */
  private handlerMs: number | undefined;

  constructor(
    private readonly concurrency: number,
    /** The most jobs held: concurrency + prefetch. */
    private readonly capacity: number,
  ) {
    this.current = concurrency;
  }

  /** The most jobs to hold now. */
  get size(): number {
    return this.current;
  }

  /** How many more jobs to ask for while `held` are held. */
  need(held: number): number {
    return Math.max(0, this.current - held);
  }

  /** A handler ran for `ms`: updates the speed, and brings the window down at once when handlers got slower. */
  observe(ms: number): void {
    this.handlerMs = this.handlerMs === undefined ? ms : this.handlerMs + WEIGHT * (ms - this.handlerMs);
    this.current = Math.min(this.current, this.aim());
  }

  /** A reserve asked for `asked` jobs and got `got`. */
  reserved(asked: number, got: number): void {
    if (asked === 0) {
      return;
    }
    const next = got >= asked ? this.current * 2 : got;
    this.current = Math.max(this.concurrency, Math.min(next, this.aim()));
  }

  /** Jobs had to be given back because they waited too long: hold no more than `held` from now on. */
  shrinkTo(held: number): void {
    this.current = Math.min(this.current, Math.max(held, this.concurrency));
  }

  /** The work of the next {@link HORIZON_MS} at the observed speed, within concurrency and capacity. */
  private aim(): number {
    if (this.handlerMs === undefined) {
      return this.concurrency;
    }
    const jobs = (this.concurrency * HORIZON_MS) / Math.max(this.handlerMs, 1e-3);
    return Math.min(this.capacity, Math.max(this.concurrency, Math.ceil(jobs)));
  }
}
