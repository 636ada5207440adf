/**
 * The conversions between the client's types and the API's wire types of `openapi.ts`.
 * Each is typed against the generated types, so a field the server renames, drops or
 * makes required fails the type check here.
 *
 * @module
 */

import { Buffer } from "node:buffer";

import { apiError } from "./errors.js";
import { Delivery, Job, backoffFrom, msDate, type Page, type Reserved } from "./job.js";
import type * as wire from "./openapi.js";
import type {
  Backoff,
  Body,
  LeaseRef,
  NackResult,
  Pause,
  PushOptions,
  PushResult,
  Schedule,
  ScheduleSpec,
  Settled,
  Settlement,
  Stats,
  Time,
  TopicSettings,
} from "./types.js";

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
  if (l.token !== undefined) {
    return { topic: l.topic, id: l.id, token: l.token };
  }
  throw noLease(l);
}

/** The token or receipt of a lease, for the per-job lease operations. */
export function leaseBody(l: LeaseRef): wire.TokenRequest {
  if (l.token !== undefined) {
    return { token: l.token };
  }
  if (l.receipt !== undefined) {
    return { receipt: l.receipt };
  }
  throw noLease(l);
}

function noLease(l: LeaseRef): TypeError {
  return new TypeError(`the lease of job ${l.id} of topic ${l.topic} has neither a token nor a receipt`);
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
    // A server from before issue 37 does not send it.
    unreachable: r.unreachable ?? [],
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
    max_lateness_ms: s.maxLatenessMs,
    expires_at: s.expiresAt === undefined ? undefined : rfc3339(s.expiresAt),
    on_expire: s.onExpire,
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
    maxLatenessMs: s.max_lateness_ms ?? undefined,
    expiresAt: isoDate(s.expires_at),
    onExpire: s.on_expire ?? undefined,
    raw: s,
  };
}
