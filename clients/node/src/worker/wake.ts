/**
 * {@link Wake}: what the worker's loop sleeps on between turns: woken when something
 * happened (a call came back, a handler ended, shutdown began), or at its next timer.
 *
 * @module
 */

/** Wakes the worker's loop: when something happened, or at the next timer. */
export class Wake {
  private pending = false;
  private resolve: (() => void) | undefined;

  /** Something happened: the loop looks again. */
  notify(): void {
    const resolve = this.resolve;
    if (resolve === undefined) {
      this.pending = true;
      return;
    }
    this.resolve = undefined;
    resolve();
  }

  /** Resolves at the next {@link Wake.notify} or at `until` (`performance.now()` ms), whichever is first. */
  wait(until: number | undefined): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((ok) => {
      const timer = until === undefined ? undefined : setTimeout(() => this.notify(), Math.max(0, until - performance.now()));
      this.resolve = () => {
        clearTimeout(timer);
        ok();
      };
    });
  }
}
