/**
 * The client's own types: camelCase, times as `Date`, durations in ms. The job and the
 * delivery are classes of their own (`job.ts`); `wire.ts` converts from and to the API's
 * wire types.
 *
 * @module
 */

import type { DelayqError } from "./errors.js";
import type * as wire from "./openapi.js";

/** A job body: text (sent as UTF-8) or bytes (sent as base64). */
export type Body = string | Uint8Array;

/** An absolute time: a `Date`, an RFC 3339 string, or milliseconds since the Unix epoch. */
export type Time = Date | string | number;

/** A job's state. */
export type JobState = wire.StateDto;

/** A retry back-off: after n failures, `min(maxMs, baseMs · factor^(n−1))`, less up to `jitter` of it. */
export interface Backoff {
  /** `fixed` or `exponential`. */
  readonly kind: wire.BackoffKind;
  /** The first delay in ms. */
  readonly baseMs: number;
  /** The growth factor (exponential only; default 2). */
  readonly factor?: number | undefined;
  /** The cap in ms (exponential only; default 1 h). */
  readonly maxMs?: number | undefined;
  /** A fraction from 0 to 1 taken off each delay at random (default 0). */
  readonly jitter?: number | undefined;
}

/** The options of a push; every one is optional (the topic's settings, then the server's defaults apply). */
export interface PushOptions {
  /** The job id and idempotency key (1 to 200 visible ASCII characters); the server generates a UUIDv7 without one. */
  readonly id?: string | undefined;
  /** Due this many ms after the server receives the push (not with `at`). */
  readonly delayMs?: number | undefined;
  /** Due at this time on the server's clock (not with `delayMs`); a time in the past means now. */
  readonly at?: Time | undefined;
  /** Among due jobs, lower runs first (default 0). */
  readonly priority?: number | undefined;
  /** The lease length of each delivery in ms (1 s to 24 h; default 30 s). */
  readonly ttrMs?: number | undefined;
  /** Deliveries before the job goes dead (default 3). */
  readonly maxAttempts?: number | undefined;
  /** The retry back-off (default exponential from 1 s, doubling, up to 1 h, 10 % jitter). */
  readonly backoff?: Backoff | undefined;
  /** When a live job has this id: `keep` it (default), `replace` a waiting one, or `debounce`. */
  readonly onConflict?: wire.OnConflictDto | undefined;
  /** With `debounce`: the latest the job may become due, in ms after its first push. */
  readonly maxWaitMs?: number | undefined;
  /** Not delivered more than this many ms after its due time (not with `expiresAt`). */
  readonly maxLatenessMs?: number | undefined;
  /** Not delivered after this time (not with `maxLatenessMs`). */
  readonly expiresAt?: Time | undefined;
  /** What an expired job becomes: `dead` (default) or `drop` (deleted). */
  readonly onExpire?: wire.OnExpireDto | undefined;
}

/** One job of a batch push: its body and its options. */
export interface NewJob extends PushOptions {
  /** The payload. */
  readonly body: Body;
}

export type { PushResult } from "./pushed.js";

/** Names a delivery's lease: its topic, id, and its token or receipt. A `Delivery` is one. */
export interface LeaseRef {
  /** The topic. */
  readonly topic: string;
  /** The job id. */
  readonly id: string;
  /** The delivery's fencing token. */
  readonly token?: number | undefined;
  /** The delivery's receipt (used when there is no token). */
  readonly receipt?: string | undefined;
}

/** What to do with a delivery, sent with a reserve (`settle`). */
export type Settlement =
  | { readonly lease: LeaseRef; readonly outcome: "ack" | "release" }
  | { readonly lease: LeaseRef; readonly outcome: "nack"; readonly delayMs?: number | undefined; readonly reason?: string | undefined }
  | { readonly lease: LeaseRef; readonly outcome: "bury"; readonly reason?: string | undefined };

/** The answer to one settlement, or to one ack of a batch. */
export interface Settled {
  /** True when the outcome was recorded. */
  readonly ok: boolean;
  /** Why not (`LeaseLostError`, `NotFoundError`, `WrongStateError`). */
  readonly error: DelayqError | undefined;
  /** For a recorded nack: `retry` or `dead`. */
  readonly outcome: "retry" | "dead" | undefined;
  /** For a nack answered `retry`: when it is due again. */
  readonly readyAt: Date | undefined;
}


/** What a nack did. */
export interface NackResult {
  /** `retry` (due again at `readyAt`) or `dead` (out of attempts). */
  readonly outcome: "retry" | "dead";
  /** When it is due again, for `retry`. */
  readonly readyAt: Date | undefined;
}


/** Counts and health of a topic. */
export interface Stats {
  /** The topic. */
  readonly topic: string;
  /** Jobs waiting for their due time. */
  readonly delayed: number;
  /** Due jobs waiting for a worker. */
  readonly ready: number;
  /** Leased jobs. */
  readonly reserved: number;
  /** Dead jobs. */
  readonly dead: number;
  /** Done jobs kept by the topic's retention. */
  readonly done: number;
  /** Leases that ran out without an answer, since the topic was created or last purged. */
  readonly expiredLeases: number;
  /** Jobs whose expiry passed before a delivery, since the topic was created or last purged. */
  readonly expiredJobs: number;
  /** True while the topic is paused. */
  readonly paused: boolean;
  /** When the pause ends, when it has an end. */
  readonly pausedUntil: Date | undefined;
  /** The earliest due time among delayed jobs. */
  readonly nextDue: Date | undefined;
  /** How long the longest-waiting due job has waited, in ms. */
  readonly oldestOverdueMs: number | undefined;
}

/** A topic's pause. */
export interface Pause {
  /** True while paused. */
  readonly paused: boolean;
  /** When the pause ends; absent: until resumed. */
  readonly until: Date | undefined;
}

/** A topic's settings: the defaults of jobs pushed without their own, its body limit and retention. */
export interface TopicSettings {
  /** The lease length of jobs pushed without one, in ms. */
  readonly ttrMs?: number | undefined;
  /** The deliveries allowed to jobs pushed without `maxAttempts`. */
  readonly maxAttempts?: number | undefined;
  /** The back-off of jobs pushed without one. */
  readonly backoff?: Backoff | undefined;
  /** The largest body in bytes (the server's limit stays when smaller). */
  readonly maxBody?: number | undefined;
  /** Keep acked jobs (state `done`) up to `maxJobs` of them for up to `maxAgeMs` after their ack. */
  readonly retention?: { readonly maxJobs: number; readonly maxAgeMs: number } | undefined;
}

/** A recurring job: a cron expression in a time zone, and the job each fire pushes. */
export interface ScheduleSpec {
  /** Five fields (minute hour day-of-month month day-of-week), or six with seconds first. */
  readonly cron: string;
  /** The topic the jobs go to. */
  readonly topic: string;
  /** The jobs' body (default empty). */
  readonly body?: Body | undefined;
  /** An IANA time zone (default `UTC`). */
  readonly timeZone?: string | undefined;
  /** The jobs' priority. */
  readonly priority?: number | undefined;
  /** The jobs' lease length in ms. */
  readonly ttrMs?: number | undefined;
  /** The jobs' deliveries before dead. */
  readonly maxAttempts?: number | undefined;
  /** The jobs' back-off. */
  readonly backoff?: Backoff | undefined;
  /** No fire before this time. */
  readonly start?: Time | undefined;
  /** No fire after this time. */
  readonly end?: Time | undefined;
  /** Each job is due up to this many ms after its fire time. */
  readonly jitterMs?: number | undefined;
  /** Fires missed while no server ran: `skip` (default), `once` or `each`. */
  readonly misfire?: wire.MisfireDto | undefined;
  /** With `each`, the most missed fires pushed. */
  readonly misfireLimit?: number | undefined;
  /** Each job is not delivered more than this many ms after its due time (not with `expiresAt`). */
  readonly maxLatenessMs?: number | undefined;
  /** No job of this schedule is delivered after this time (not with `maxLatenessMs`). */
  readonly expiresAt?: Time | undefined;
  /** What an expired job does: `dead` (default, with the reason "expired") or `drop`. */
  readonly onExpire?: wire.OnExpireDto | undefined;
}

/** A stored schedule and its state. */
export interface Schedule {
  /** The name. */
  readonly name: string;
  /** The cron expression. */
  readonly cron: string;
  /** The time zone. */
  readonly timeZone: string;
  /** The topic. */
  readonly topic: string;
  /** 1 when created, + 1 at each replacement. */
  readonly revision: number;
  /** The next fire time; absent once the schedule has ended. */
  readonly nextFire: Date | undefined;
  /** The latest fire time whose job was pushed. */
  readonly pushedThrough: Date | undefined;
  /** The jobs' `maxLatenessMs`, if any. */
  readonly maxLatenessMs: number | undefined;
  /** The jobs' `expiresAt`, if any. */
  readonly expiresAt: Date | undefined;
  /** What the jobs do when they expire; absent without an expiry. */
  readonly onExpire: wire.OnExpireDto | undefined;
  /** The schedule as the server returned it. */
  readonly raw: wire.ScheduleDto;
}
