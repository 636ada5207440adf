/**
 * {@link Job}, a stored job as the server shows it, and {@link Delivery}, a job handed out by
 * a reserve with its lease, both built from their wire forms; and the answers made of them:
 * {@link Reserved} (a reserve's) and {@link Page} (a listing's).
 *
 * @module
 */

import { Buffer } from "node:buffer";

import type * as wire from "./openapi.js";
import type { Backoff, JobState, LeaseRef, Settled } from "./types.js";

/** A stored job, as `get`, `list` and a delivery show it. */
export class Job {
  /** The topic. */
  readonly topic: string;
  /** The id. */
  readonly id: string;
  /** The body as sent on the wire: the text, or base64 when `encoding` is `base64`. */
  readonly body: string;
  /** `utf8` when the body is text, `base64` for other bytes. */
  readonly encoding: wire.Encoding;
  /** The state. */
  readonly state: JobState;
  /** Among due jobs, lower runs first. */
  readonly priority: number;
  /** The due time. */
  readonly readyAt: Date;
  /** The lease length of a delivery in ms. */
  readonly ttrMs: number;
  /** Deliveries allowed before it goes dead. */
  readonly maxAttempts: number;
  /** Deliveries so far; in a delivery, the attempt number of that delivery (1 for the first). */
  readonly attempts: number;
  /** The retry back-off. */
  readonly backoff: Backoff;
  /** When it was pushed. */
  readonly createdAt: Date;
  /** The lease deadline while reserved, the time of death while dead, of the ack while done. */
  readonly deadline: Date | undefined;
  /** The latest it may be delivered, when it has an expiry. */
  readonly expiresAt: Date | undefined;
  /** What happens when it expires, when it has an expiry. */
  readonly onExpire: wire.OnExpireDto | undefined;
  /** The reason of the last nack or bury, `lease expired` or `expired`. */
  readonly lastError: string | undefined;

  /** A job from its wire form. */
  constructor(dto: wire.JobDto) {
    this.topic = dto.topic;
    this.id = dto.id;
    this.body = dto.body;
    this.encoding = dto.encoding;
    this.state = dto.state;
    this.priority = dto.priority;
    this.readyAt = new Date(dto.ready_at_ms);
    this.ttrMs = dto.ttr_ms;
    this.maxAttempts = dto.max_attempts;
    this.attempts = dto.attempts;
    this.backoff = backoffFrom(dto.backoff);
    this.createdAt = new Date(dto.created_at);
    this.deadline = msDate(dto.deadline_ms);
    this.expiresAt = msDate(dto.expires_at_ms);
    this.onExpire = dto.on_expire ?? undefined;
    this.lastError = dto.last_error ?? undefined;
  }

  /** The body's bytes. */
  bytes(): Uint8Array {
    return this.encoding === "base64" ? Buffer.from(this.body, "base64") : Buffer.from(this.body, "utf8");
  }

  /** The body as text (bytes that are not UTF-8 are replaced by U+FFFD). */
  text(): string {
    return this.encoding === "base64" ? Buffer.from(this.body, "base64").toString("utf8") : this.body;
  }

  /** The body parsed as JSON. */
  json<T = unknown>(): T {
    return JSON.parse(this.text()) as T;
  }
}

/** A job handed out by a reserve, with its lease. */
export class Delivery implements LeaseRef {
  /** The job: `attempts` is this delivery's attempt number, `deadline` its lease deadline. */
  readonly job: Job;
  /** The lease's fencing token (absent at most once). */
  readonly token: number | undefined;
  /** The one string that names this lease (absent at most once). */
  readonly receipt: string | undefined;
  /** How late the delivery is in ms (the server's time at reserve minus the due time). */
  readonly latenessMs: number;

  /** A delivery from its wire form. */
  constructor(dto: wire.DeliveryDto) {
    this.job = new Job(dto.job);
    this.token = dto.token ?? undefined;
    this.receipt = dto.receipt ?? undefined;
    this.latenessMs = dto.lateness_ms;
  }

  /** The job's topic. */
  get topic(): string {
    return this.job.topic;
  }

  /** The job's id. */
  get id(): string {
    return this.job.id;
  }
}

/** A time in ms since the epoch as a `Date`, if there is one. */
export function msDate(ms: number | null | undefined): Date | undefined {
  return ms === null || ms === undefined ? undefined : new Date(ms);
}

/** A back-off from the wire. */
export function backoffFrom(b: wire.BackoffDto): Backoff {
  return {
    kind: b.kind,
    baseMs: b.base_ms,
    factor: b.factor ?? undefined,
    maxMs: b.max_ms ?? undefined,
    jitter: b.jitter ?? undefined,
  };
}

/** What a reserve returned. */
export interface Reserved {
  /** The jobs, each with its lease. */
  readonly deliveries: Delivery[];
  /** One answer per settlement sent, in order. */
  readonly settled: Settled[];
  /** The wait the server used (the one asked, cut to its long-poll limit). */
  readonly waitMs: number;
  /**
   * The asked topics the server could not reach (a Redis Cluster primary down or hung: the
   * answer holds the other topics' jobs, theirs wait until it answers); empty when it
   * reached them all.
   */
  readonly unreachable: string[];
}

/** One page of a listing. */
export interface Page {
  /** The jobs, in the state's order. */
  readonly jobs: Job[];
  /** Pass as `cursor` for the next page; absent on the last one. */
  readonly nextCursor: string | undefined;
  /** With a `prefix`: how many jobs the server looked at for this page. */
  readonly scanned: number | undefined;
}
