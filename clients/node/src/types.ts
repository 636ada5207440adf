/**
 * The client's own types (camelCase, times as `Date`) and their conversion from and to the
 * API's wire types of `openapi.ts`. Each conversion is typed against the generated types,
 * so a field the server renames or drops fails the type check here.
 *
 * @module
 */

import { Buffer } from "node:buffer";

import { apiError, type DelayqError } from "./errors.js";
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

/** The answer to a push. */
export interface PushResult {
  /** The job id (given or generated). */
  readonly id: string;
  /** True when this push created the job; false when a live job had the id. */
  readonly created: boolean;
  /** True when this push replaced a waiting job's body and time (`replace`, `debounce`). */
  readonly replaced: boolean;
  /** The job's state. */
  readonly state: JobState;
  /** Its due time. */
  readonly readyAt: Date;
}

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

/** Names a delivery's lease: its topic, id, and its token or receipt. A {@link Delivery} is one. */
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

/** What a reserve returned. */
export interface Reserved {
  /** The jobs, each with its lease. */
  readonly deliveries: Delivery[];
  /** One answer per settlement sent, in order. */
  readonly settled: Settled[];
  /** The wait the server used (the one asked, cut to its long-poll limit). */
  readonly waitMs: number;
}

/** What a nack did. */
export interface NackResult {
  /** `retry` (due again at `readyAt`) or `dead` (out of attempts). */
  readonly outcome: "retry" | "dead";
  /** When it is due again, for `retry`. */
  readonly readyAt: Date | undefined;
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
  /** The schedule as the server returned it. */
  readonly raw: wire.ScheduleDto;
}

// Conversions.

/** A `Time` as the RFC 3339 string the API takes. */
export function rfc3339(t: Time): string {
  if (typeof t === "string") {
    return t;
  }
  const d = typeof t === "number" ? new Date(t) : t;
  if (Number.isNaN(d.getTime())) {
    throw new RangeError(`not a valid time: ${String(t)}`);
  }
  return d.toISOString();
}

function msDate(ms: number | null | undefined): Date | undefined {
  return ms === null || ms === undefined ? undefined : new Date(ms);
}

function isoDate(s: string | null | undefined): Date | undefined {
  return s === null || s === undefined ? undefined : new Date(s);
}

/** A body and its `encoding` on the wire. */
export function bodyToWire(body: Body): { body: string; encoding?: wire.Encoding } {
  if (typeof body === "string") {
    return { body };
  }
  return { body: Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("base64"), encoding: "base64" };
}

/** A back-off on the wire. */
export function backoffToWire(b: Backoff): wire.BackoffDto {
  return { kind: b.kind, base_ms: b.baseMs, factor: b.factor, max_ms: b.maxMs, jitter: b.jitter };
}

function backoffFrom(b: wire.BackoffDto): Backoff {
  return {
    kind: b.kind,
    baseMs: b.base_ms,
    factor: b.factor ?? undefined,
    maxMs: b.max_ms ?? undefined,
    jitter: b.jitter ?? undefined,
  };
}

/** A push on the wire. */
export function pushToWire(body: Body, o: PushOptions): wire.PushRequest {
  return {
    ...bodyToWire(body),
    id: o.id,
    delay_ms: o.delayMs,
    ready_at: o.at === undefined ? undefined : rfc3339(o.at),
    priority: o.priority,
    ttr_ms: o.ttrMs,
    max_attempts: o.maxAttempts,
    backoff: o.backoff === undefined ? undefined : backoffToWire(o.backoff),
    on_conflict: o.onConflict,
    max_wait_ms: o.maxWaitMs,
    max_lateness_ms: o.maxLatenessMs,
    expires_at: o.expiresAt === undefined ? undefined : rfc3339(o.expiresAt),
    on_expire: o.onExpire,
  };
}

/** The answer to a push. */
export function pushResultFrom(r: wire.PushResponse): PushResult {
  return { id: r.id, created: r.created, replaced: r.replaced, state: r.state, readyAt: new Date(r.ready_at_ms) };
}

/** A lease as a settle item. */
export function settlementToWire(s: Settlement): wire.SettleItem {
  const lease = leaseToWire(s.lease);
  switch (s.outcome) {
    case "ack":
      return lease;
    case "release":
      return { ...lease, outcome: "release" };
    case "nack":
      return { ...lease, outcome: "nack", delay_ms: s.delayMs, reason: s.reason };
    case "bury":
      return { ...lease, outcome: "bury", reason: s.reason };
  }
}

/** A lease in a settle item: its receipt alone, or its topic, id and token. */
function leaseToWire(l: LeaseRef): wire.SettleItem {
  if (l.receipt !== undefined) {
    return { receipt: l.receipt };
  }
  return { topic: l.topic, id: l.id, token: requireToken(l) };
}

/** The token or receipt of a lease, for the per-job lease operations. */
export function leaseBody(l: LeaseRef): wire.TokenRequest {
  return l.token !== undefined ? { token: l.token } : { receipt: requireReceipt(l) };
}

function requireToken(l: LeaseRef): number {
  if (l.token === undefined) {
    throw new TypeError(`the lease of job ${l.id} of topic ${l.topic} has neither a token nor a receipt`);
  }
  return l.token;
}

function requireReceipt(l: LeaseRef): string {
  if (l.receipt === undefined) {
    throw new TypeError(`the lease of job ${l.id} of topic ${l.topic} has neither a token nor a receipt`);
  }
  return l.receipt;
}

/** The answer to a settlement or a batch ack, its error typed. */
export function settledFrom(r: wire.SettleResult | wire.AckResult): Settled {
  const error = r.error === null || r.error === undefined ? undefined : apiError(r.error);
  const outcome = "outcome" in r && (r.outcome === "retry" || r.outcome === "dead") ? r.outcome : undefined;
  const readyAt = "ready_at" in r ? isoDate(r.ready_at) : undefined;
  return { ok: r.ok, error, outcome, readyAt };
}

/** A reserve's answer. */
export function reservedFrom(r: wire.ReserveResponse): Reserved {
  return {
    deliveries: r.jobs.map((d) => new Delivery(d)),
    settled: r.settled.map(settledFrom),
    waitMs: r.wait_ms,
  };
}

/** A nack's answer. */
export function nackResultFrom(r: wire.NackResponse): NackResult {
  return { outcome: r.outcome === "dead" ? "dead" : "retry", readyAt: isoDate(r.ready_at) };
}

/** A listing's page. */
export function pageFrom(r: wire.ListResponse): Page {
  return { jobs: r.jobs.map((j) => new Job(j)), nextCursor: r.next_cursor ?? undefined, scanned: r.scanned ?? undefined };
}

/** A topic's stats. */
export function statsFrom(s: wire.StatsDto): Stats {
  return {
    topic: s.topic,
    delayed: s.delayed,
    ready: s.ready,
    reserved: s.reserved,
    dead: s.dead,
    done: s.done,
    expiredLeases: s.expired_leases,
    expiredJobs: s.expired_jobs,
    paused: s.paused,
    pausedUntil: isoDate(s.paused_until),
    nextDue: isoDate(s.next_due),
    oldestOverdueMs: s.oldest_overdue_ms ?? undefined,
  };
}

/** A pause's answer. */
export function pauseFrom(p: wire.PauseResponse): Pause {
  return { paused: p.paused, until: isoDate(p.paused_until) };
}

/** Topic settings on the wire. */
export function settingsToWire(s: TopicSettings): wire.TopicConfigDto {
  return {
    ttr_ms: s.ttrMs,
    max_attempts: s.maxAttempts,
    backoff: s.backoff === undefined ? undefined : backoffToWire(s.backoff),
    max_body: s.maxBody,
    retention: s.retention === undefined ? undefined : { max_jobs: s.retention.maxJobs, max_age_ms: s.retention.maxAgeMs },
  };
}

/** Topic settings from the wire. */
export function settingsFrom(s: wire.TopicConfigDto): TopicSettings {
  return {
    ttrMs: s.ttr_ms ?? undefined,
    maxAttempts: s.max_attempts ?? undefined,
    backoff: s.backoff === null || s.backoff === undefined ? undefined : backoffFrom(s.backoff),
    maxBody: s.max_body ?? undefined,
    retention:
      s.retention === null || s.retention === undefined
        ? undefined
        : { maxJobs: s.retention.max_jobs, maxAgeMs: s.retention.max_age_ms },
  };
}

/** A schedule on the wire. */
export function scheduleToWire(s: ScheduleSpec): wire.ScheduleRequest {
  const body = s.body === undefined ? {} : bodyToWire(s.body);
  return {
    ...body,
    cron: s.cron,
    topic: s.topic,
    time_zone: s.timeZone,
    priority: s.priority,
    ttr_ms: s.ttrMs,
    max_attempts: s.maxAttempts,
    backoff: s.backoff === undefined ? undefined : backoffToWire(s.backoff),
    start: s.start === undefined ? undefined : rfc3339(s.start),
    end: s.end === undefined ? undefined : rfc3339(s.end),
    jitter_ms: s.jitterMs,
    misfire: s.misfire,
    misfire_limit: s.misfireLimit,
  };
}

/** A schedule from the wire. */
export function scheduleFrom(s: wire.ScheduleDto): Schedule {
  return {
    name: s.name,
    cron: s.cron,
    timeZone: s.time_zone,
    topic: s.topic,
    revision: s.revision,
    nextFire: msDate(s.next_fire_ms),
    pushedThrough: isoDate(s.pushed_through),
    raw: s,
  };
}
