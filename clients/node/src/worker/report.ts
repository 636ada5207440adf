/**
 * The worker's {@link Report}, and the answering of each settlement the server replied to:
 * logged, and counted in the report.
 *
 * @module
 */

import { endsDelivery, type DelayqError } from "../errors.js";
import type { Logger } from "../log.js";
import type { Settled } from "../types.js";
import type { Pending } from "./outbox.js";

/** What a worker did, returned when it stops. */
export interface Report {
  /** Jobs whose handler succeeded, acked. */
  readonly acked: number;
  /** Jobs whose handler failed, retried by the server later. */
  readonly retried: number;
  /** Jobs whose handler failed on their last attempt: sent to dead. */
  readonly dead: number;
  /** Jobs whose handler threw a `PermanentError`: buried. */
  readonly buried: number;
  /** Jobs given back to the server at shutdown (buffered, or whose handler did not end in time). */
  readonly released: number;
  /** Deliveries whose lease was lost (expired, deleted, redelivered): their outcome was not recorded. */
  readonly leaseLost: number;
  /** Outcomes the server did not record for another reason (unreachable until the lease ended). */
  readonly failed: number;
}

/** The counts behind a {@link Report}. */
export class Tally {
  private counts = { acked: 0, retried: 0, dead: 0, buried: 0, released: 0, leaseLost: 0, failed: 0 };

  constructor(private readonly log: Logger) {}

  /** A copy of the counts. */
  report(): Report {
    return { ...this.counts };
  }

  /** A lease was lost while its handler ran. */
  lost(topic: string, id: string, reason: Error): void {
    this.counts.leaseLost++;
    this.log.warn("lease lost while the handler ran: its outcome is not recorded", { topic, id, error: reason });
  }

  /** The server answered `settled` to `p`. */
  answered(p: Pending, settled: Settled): void {
    const { topic, id } = p.settlement.lease;
    if (!settled.ok) {
      this.notRecorded(p, settled.error);
      return;
    }
    switch (p.purpose) {
      case "ack":
        this.counts.acked++;
        this.log.debug("job done", { topic, id });
        return;
      case "nack":
        if (settled.outcome === "dead") {
          this.counts.dead++;
          this.log.error("job failed on its last attempt: sent to dead", { topic, id, reason: reasonOf(p) });
        } else {
          this.counts.retried++;
          this.log.warn("job failed: retry scheduled", { topic, id, reason: reasonOf(p), retryAt: settled.readyAt });
        }
        return;
      case "bury":
        this.counts.buried++;
        this.log.error("job failed permanently: sent to dead", { topic, id, reason: reasonOf(p) });
        return;
      case "release":
        this.counts.released++;
        this.log.info("shutdown: job given back to the server", { topic, id });
        return;
      case "give-back":
        this.log.info("a buffered job waited too long for a handler: given back to the server", { topic, id });
        return;
    }
  }

  /** The settlement `p` was not recorded: the server refused it, or could not be reached while its lease lasted. */
  notRecorded(p: Pending, error: DelayqError | undefined): void {
    const { topic, id } = p.settlement.lease;
    if (endsDelivery(error)) {
      this.counts.leaseLost++;
      this.log.warn(`cannot ${p.settlement.outcome}: the lease was lost; the server decides what happens next`, {
        topic,
        id,
        error,
      });
    } else {
      if (p.purpose !== "give-back") {
        this.counts.failed++;
      }
      this.log.error(`cannot ${p.settlement.outcome}: the job comes back when its lease ends`, { topic, id, error });
    }
  }
}

function reasonOf(p: Pending): string | undefined {
  const s = p.settlement;
  return s.outcome === "nack" || s.outcome === "bury" ? s.reason : undefined;
}
