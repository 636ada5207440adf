/**
 * The outbox: settlements (acks, nacks, buries, releases) waiting for the worker's next
 * reserve, which carries them (settle-in-reserve), coalesced by time ({@link LINGER}) and
 * size ({@link FLUSH_SIZE}).
 *
 * Times are `performance.now()` milliseconds.
 *
 * @module
 */

import type { Settlement } from "../types.js";

/** The longest a settlement waits for company before it is sent on its own, in ms. */
export const LINGER_MS = 5;
/** Settlements sent at once, without waiting for {@link LINGER_MS}. */
export const FLUSH_SIZE = 256;
/** The most settlements one reserve carries (the server's limit). */
export const MAX_BATCH = 1000;

/** What a settlement was for, so that its answer can be logged and counted. */
export type Purpose =
  | "ack"
  | "nack"
  | "bury"
  /** A delivery given back at shutdown: counted as released. */
  | "release"
  /** A buffered job given back because its lease ran low while every handler was busy. */
  | "give-back";

/** One settlement waiting to be sent. */
export interface Pending {
  readonly settlement: Settlement;
  readonly purpose: Purpose;
  /** Sent again after a failed call only until then (the lease is over by then). */
  readonly until: number;
}

/** The settlements not sent yet, oldest first. */
export class Outbox {
  private items: Pending[] = [];
  /** When the oldest waiting settlement arrived. */
  private since: number | undefined;

  /** Settlements waiting. */
  get size(): number {
    return this.items.length;
  }

  push(item: Pending, now: number): void {
    this.since ??= now;
    this.items.push(item);
  }

  /** When the waiting settlements should go even without a reserve to ride with. */
  flushAt(): number | undefined {
    if (this.since === undefined) {
      return undefined;
    }
    return this.items.length >= FLUSH_SIZE ? this.since : this.since + LINGER_MS;
  }

  /** True when the waiting settlements should go now. */
  due(now: number): boolean {
    const at = this.flushAt();
    return at !== undefined && at <= now;
  }

  /** Takes up to one call's worth, oldest first. */
  take(): Pending[] {
    const taken = this.items.splice(0, MAX_BATCH);
    if (this.items.length === 0) {
      this.since = undefined;
    }
    return taken;
  }

  /** Puts back the settlements of a call that failed, ahead of newer ones, due at once. */
  putBack(items: readonly Pending[], now: number): void {
    if (items.length === 0) {
      return;
    }
    this.items = [...items, ...this.items];
    this.since = Math.min(this.since ?? now, now) - LINGER_MS;
  }
}
