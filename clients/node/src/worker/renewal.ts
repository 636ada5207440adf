/**
 * Lease renewal of one running handler: `touch` at about half of the lease (the worker's
 * `renewFraction` of the ttr), extending it by the job's ttr, until the handler ends; a
 * lease the server says is lost, or that ends before a renewal is answered, is reported
 * once through `onLost`.
 *
 * Lease ends are local estimates on the early side: a touch extends the lease to the
 * server's now + ttr, and the server's now is after the touch was sent, so `sent + ttr` is
 * never later than the real deadline.
 *
 * @module
 */

import type { Client } from "../client.js";
import { LeaseLostError, endsDelivery } from "../errors.js";
import type { Logger } from "../log.js";
import type { LeaseRef } from "../types.js";

/** The settings of a renewal. */
export interface RenewalPolicy {
  /** The time between touches as a fraction of the ttr. */
  readonly fraction: number;
  /** The first pause before retrying a touch that failed for another reason than a lost lease, in ms. */
  readonly retryInitialMs: number;
}

/** The renewal of one delivery's lease while its handler runs. */
export class Renewal {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private end: number;
  private readonly interval: number;
  private readonly retryInitial: number;
  private pause: number;

  constructor(
    private readonly client: Client,
    private readonly lease: LeaseRef,
    private readonly ttrMs: number,
    /** The estimated end of the current lease (`performance.now()` ms). */
    leaseEnd: number,
    policy: RenewalPolicy,
    private readonly log: Logger,
    private readonly onLost: (reason: Error) => void,
  ) {
    this.end = leaseEnd;
    this.interval = Math.max(1, ttrMs * policy.fraction);
    this.retryInitial = Math.min(policy.retryInitialMs, this.interval);
    this.pause = this.retryInitial;
    // The first renewal is due `interval` after the lease started (at once if it waited in the buffer longer).
    this.schedule(leaseEnd - ttrMs + this.interval);
  }

  /** The estimated end of the lease. */
  get leaseEnd(): number {
    return this.end;
  }

  /** Stops renewing (the handler ended). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(at: number): void {
    if (this.stopped) {
      return;
    }
    this.timer = setTimeout(() => void this.touch(), Math.max(0, at - performance.now()));
  }

  private async touch(): Promise<void> {
    const sent = performance.now();
    if (sent >= this.end) {
      this.lose(lostLocally("the lease ended before it could be renewed"));
      return;
    }
    try {
      await this.client.touch(this.lease, { timeoutMs: Math.max(1, this.end - sent) });
      if (this.stopped) {
        return;
      }
      this.end = sent + this.ttrMs;
      this.pause = this.retryInitial;
      this.schedule(sent + this.interval);
    } catch (e) {
      if (this.stopped) {
        return;
      }
      const now = performance.now();
      if (endsDelivery(e)) {
        this.lose(e);
      } else if (now >= this.end) {
        this.lose(lostLocally("the lease ended before a renewal was answered"));
      } else {
        this.log.warn("cannot renew the lease; retrying", {
          topic: this.lease.topic,
          id: this.lease.id,
          error: e,
          retryInMs: Math.round(this.pause),
        });
        this.schedule(Math.min(now + this.pause, this.end));
        this.pause = Math.min(this.pause * 2, this.interval);
      }
    }
  }

  private lose(reason: Error): void {
    this.stop();
    this.onLost(reason);
  }
}

function lostLocally(message: string): LeaseLostError {
  return new LeaseLostError(409, { code: "lease_lost", message });
}
