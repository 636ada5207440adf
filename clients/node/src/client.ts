/**
 * {@link Client}: every call of delayq's HTTP API a producer, an operator or a hand-written
 * consumer makes; the {@link Worker} runs on it.
 *
 * @module
 */

import { Transport, type CallOptions, type ClientOptions } from "./http.js";
import type { PushBatchFailed, StateDto } from "./openapi.js";
import { ApiError } from "./errors.js";
import { Job, type Page, type Reserved } from "./job.js";
import type {
  Body,
  LeaseRef,
  NackResult,
  NewJob,
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
import {
  leaseBody,
  nackResultFrom,
  pageFrom,
  pauseFrom,
  pushResultFrom,
  pushToWire,
  reservedFrom,
  rfc3339,
  scheduleFrom,
  scheduleToWire,
  settingsFrom,
  settingsToWire,
  settledFrom,
  settlementToWire,
  statsFrom,
} from "./wire.js";

/** The options of a reserve. */
export interface ReserveOptions extends CallOptions {
  /** The most jobs to take (1 to 1000, default 1; 0 to settle only). */
  readonly max?: number | undefined;
  /** How long to wait for a first job, in ms (default 0; the server cuts it to its `--max-wait`). */
  readonly waitMs?: number | undefined;
  /** Leases to settle before reserving, answered in `settled` (a lost lease never fails the call). */
  readonly settle?: readonly Settlement[] | undefined;
  /** Take the jobs at most once: removed as handed out, no lease, nothing to ack, lost if not handled. */
  readonly atMostOnce?: boolean | undefined;
}

/** The options of a listing. */
export interface ListOptions extends CallOptions {
  /** The most jobs on the page (1 to 1000; the server's default otherwise). */
  readonly limit?: number | undefined;
  /** The `nextCursor` of the previous page. */
  readonly cursor?: string | undefined;
  /** Only the jobs whose id starts with this (the server looks at most 10,000 jobs per page). */
  readonly prefix?: string | undefined;
}

/** A new due time: `{ delayMs }` from now or `{ at }` an absolute time. */
export type DueTime = { readonly delayMs: number; readonly at?: undefined } | { readonly at: Time; readonly delayMs?: undefined };

/** How long a pause lasts: `{ forMs }`, `{ until }`, or `{}` until resumed. */
export type PauseFor =
  | { readonly forMs?: undefined; readonly until?: undefined }
  | { readonly forMs: number; readonly until?: undefined }
  | { readonly until: Time; readonly forMs?: undefined };

/**
 * A connection to one delayq server: pushes, reads and manages jobs and topics, and reserves
 * and settles deliveries. It holds no state besides its settings (the platform's `fetch`
 * keeps connections alive), so one client can serve a whole process.
 *
 * ```ts
 * const client = new Client({ url: "http://127.0.0.1:7070" });
 * await client.push("orders.cancel", JSON.stringify({ order: 42 }), {
 *   id: "order-42",
 *   delayMs: 30 * 60_000,
 * });
 * ```
 *
 * Every failure is a {@link DelayqError}: one class per error code of the API
 * (`NotFoundError`, `LeaseLostError` ...), `ConnectionError` when the server cannot be
 * reached, `RequestTimeoutError` past the timeout.
 */
export class Client {
  /** The transport, for calls this class does not wrap. */
  readonly http: Transport;

  constructor(options: ClientOptions = {}) {
    this.http = new Transport(options);
  }

  /** The server's base URL. */
  get url(): string {
    return this.http.url;
  }

  // Producing.

  /** Pushes one job; pushing the id of a live job changes nothing (unless `onConflict` says so). */
  async push(topic: string, body: Body, options: PushOptions & CallOptions = {}): Promise<PushResult> {
    const r = await this.http.call("POST /v1/topics/{topic}/jobs", { path: { topic }, body: pushToWire(body, options) }, options);
    return pushResultFrom(r);
  }

  /**
   * Pushes up to 1000 jobs of one topic in one request, answered in order. When some jobs
   * were stored and others not (a Redis Cluster primary holding some of the topic's
   * partitions is down), the error thrown (a 503) says which in `results` and gives every
   * job's id in `ids`: push only the jobs not stored again, with their ids.
   */
  async pushBatch(topic: string, jobs: readonly NewJob[], options: CallOptions = {}): Promise<PushResult[]> {
    const body = { jobs: jobs.map((j) => pushToWire(j.body, j)) };
    try {
      const r = await this.http.call("POST /v1/topics/{topic}/batch", { path: { topic }, body }, options);
      return r.results.map(pushResultFrom);
    } catch (e) {
      if (e instanceof ApiError) {
        const failed = e.answer as Partial<PushBatchFailed> | undefined;
        if (Array.isArray(failed?.results) && Array.isArray(failed.ids)) {
          e.results = failed.results.map((r) => (r === null ? null : pushResultFrom(r)));
          e.ids = failed.ids;
        }
      }
      throw e;
    }
  }

  // Jobs.

  /** Reads a job in any state; `NotFoundError` when there is none. */
  async get(topic: string, id: string, options: CallOptions = {}): Promise<Job> {
    return new Job(await this.http.call("GET /v1/topics/{topic}/jobs/{id}", { path: { topic, id } }, options));
  }

  /** Deletes (cancels) a job in any state; a reserved job's lease is lost. `NotFoundError` when there is none. */
  async delete(topic: string, id: string, options: CallOptions = {}): Promise<void> {
    await this.http.call("DELETE /v1/topics/{topic}/jobs/{id}", { path: { topic, id } }, options);
  }

  /** Moves a delayed or ready job to a new due time; answers it. */
  async reschedule(topic: string, id: string, due: DueTime, options: CallOptions = {}): Promise<Date> {
    const body = { delay_ms: due.delayMs, ready_at: due.at === undefined ? undefined : rfc3339(due.at) };
    const r = await this.http.call("POST /v1/topics/{topic}/jobs/{id}/reschedule", { path: { topic, id }, body }, options);
    return new Date(r.ready_at_ms);
  }

  /** One page of the jobs in `state`; pass `nextCursor` back as `cursor` for the next. */
  async list(topic: string, state: StateDto, options: ListOptions = {}): Promise<Page> {
    const query = { state, limit: options.limit, cursor: options.cursor, prefix: options.prefix };
    return pageFrom(await this.http.call("GET /v1/topics/{topic}/jobs", { path: { topic }, query }, options));
  }

  /** Every job in `state`, page after page (`limit` is the page size). */
  async *jobs(topic: string, state: StateDto, options: Omit<ListOptions, "cursor"> = {}): AsyncGenerator<Job, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.list(topic, state, { ...options, cursor });
      yield* page.jobs;
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  }

  /** One page of a topic's dead jobs (the dead letters). */
  dead(topic: string, options: ListOptions = {}): Promise<Page> {
    return this.list(topic, "dead", options);
  }

  /** Makes a dead job ready again. */
  async kick(topic: string, id: string, options: CallOptions = {}): Promise<void> {
    await this.http.call("POST /v1/topics/{topic}/jobs/{id}/kick", { path: { topic, id } }, options);
  }

  /** Makes every dead job of a topic ready again; answers how many. */
  async kickAll(topic: string, options: CallOptions = {}): Promise<number> {
    return (await this.http.call("POST /v1/topics/{topic}/kick", { path: { topic } }, options)).count;
  }

  /** Sends a delayed or ready job to dead now, without a lease (`WrongStateError` for a reserved one). */
  async archive(topic: string, id: string, options: CallOptions & { readonly reason?: string } = {}): Promise<void> {
    const body = { reason: options.reason };
    await this.http.call("POST /v1/topics/{topic}/jobs/{id}/archive", { path: { topic, id }, body }, options);
  }

  // Topics.

  /** A topic's counts per state, pause and oldest overdue job. */
  async stats(topic: string, options: CallOptions = {}): Promise<Stats> {
    return statsFrom(await this.http.call("GET /v1/topics/{topic}/stats", { path: { topic } }, options));
  }

  /** Every topic with its stats, sorted by name. */
  async topics(options: CallOptions = {}): Promise<Stats[]> {
    return (await this.http.call("GET /v1/topics", {}, options)).topics.map(statsFrom);
  }

  /**
   * Removes every job of a topic, in every state; answers how many. Its settings and its pause
   * stay. `NotFoundError` for a topic with no jobs, no settings and no pause (a typo?).
   */
  async purge(topic: string, options: CallOptions = {}): Promise<number> {
    return (await this.http.call("DELETE /v1/topics/{topic}", { path: { topic } }, options)).count;
  }

  /** Stops handing out a topic's jobs, for every worker of every server, until resumed or `until`/`forMs`. */
  async pause(topic: string, pause: PauseFor = {}, options: CallOptions = {}): Promise<Pause> {
    const body = { for_ms: pause.forMs, until: pause.until === undefined ? undefined : rfc3339(pause.until) };
    return pauseFrom(await this.http.call("POST /v1/topics/{topic}/pause", { path: { topic }, body }, options));
  }

  /**
   * Hands out a paused topic's jobs again. `NotFoundError` for a topic with no jobs, no
   * settings and no pause (a typo?).
   */
  async resume(topic: string, options: CallOptions = {}): Promise<void> {
    await this.http.call("POST /v1/topics/{topic}/resume", { path: { topic } }, options);
  }

  /** A topic's settings. */
  async topicSettings(topic: string, options: CallOptions = {}): Promise<TopicSettings> {
    return settingsFrom(await this.http.call("GET /v1/topics/{topic}", { path: { topic } }, options));
  }

  /** Replaces a topic's settings whole (what `settings` leaves out is unset); answers those in force. */
  async setTopicSettings(topic: string, settings: TopicSettings, options: CallOptions = {}): Promise<TopicSettings> {
    const body = settingsToWire(settings);
    return settingsFrom(await this.http.call("PUT /v1/topics/{topic}", { path: { topic }, body }, options));
  }

  // Schedules.

  /** Creates or replaces the schedule `name`. */
  async putSchedule(name: string, spec: ScheduleSpec, options: CallOptions = {}): Promise<Schedule> {
    const body = scheduleToWire(spec);
    return scheduleFrom(await this.http.call("PUT /v1/schedules/{name}", { path: { name }, body }, options));
  }

  /** Reads the schedule `name`; `NotFoundError` when there is none. */
  async getSchedule(name: string, options: CallOptions = {}): Promise<Schedule> {
    return scheduleFrom(await this.http.call("GET /v1/schedules/{name}", { path: { name } }, options));
  }

  /** Deletes the schedule `name` (and its fire pushed ahead); answers it. */
  async deleteSchedule(name: string, options: CallOptions = {}): Promise<Schedule> {
    return scheduleFrom(await this.http.call("DELETE /v1/schedules/{name}", { path: { name } }, options));
  }

  /** Every schedule, by name. */
  async schedules(options: CallOptions = {}): Promise<Schedule[]> {
    return (await this.http.call("GET /v1/schedules", {}, options)).schedules.map(scheduleFrom);
  }

  // Consuming.

  /**
   * Settles `settle` and then takes up to `max` due jobs of `topics`, waiting up to `waitMs`
   * for a first one (one request). The request's timeout is the client's plus the wait.
   */
  async reserve(topics: readonly string[], options: ReserveOptions = {}): Promise<Reserved> {
    const body = {
      topics: [...topics],
      max: options.max,
      wait_ms: options.waitMs,
      settle: options.settle?.map(settlementToWire),
      mode: options.atMostOnce === true ? ("at_most_once" as const) : undefined,
    };
    const timeoutMs = (options.timeoutMs ?? this.http.timeoutMs) + (options.waitMs ?? 0);
    const r = await this.http.call("POST /v1/reserve", { body }, { ...options, timeoutMs });
    return reservedFrom(r);
  }

  /**
   * Acks a delivery: the job is done and removed. Takes the delivery, its lease (topic, id
   * and token or receipt), or its receipt alone.
   */
  async ack(lease: LeaseRef | string, options: CallOptions = {}): Promise<void> {
    if (typeof lease === "string") {
      const [r] = await this.ackMany([lease], options);
      if (r?.error !== undefined) {
        throw r.error;
      }
      return;
    }
    const path = { topic: lease.topic, id: lease.id };
    await this.http.call("POST /v1/topics/{topic}/jobs/{id}/ack", { path, body: leaseBody(lease) }, options);
  }

  /**
   * Acks up to 1000 deliveries in one request, by receipt or by lease; each is answered
   * (a lost lease is an answer, not a failure of the call).
   */
  async ackMany(leases: readonly (LeaseRef | string)[], options: CallOptions = {}): Promise<Settled[]> {
    const receipts = leases.map((l) => (typeof l === "string" ? l : l.receipt));
    const body = receipts.every((r): r is string => r !== undefined)
      ? { receipts }
      : { leases: leases.map((l) => leaseRefToWire(l)) };
    const r = await this.http.call("POST /v1/ack", { body }, options);
    return r.results.map(settledFrom);
  }

  /** Fails a delivery: retried after `delayMs` or the job's back-off, or dead when out of attempts. */
  async nack(
    lease: LeaseRef,
    options: CallOptions & { readonly delayMs?: number; readonly reason?: string } = {},
  ): Promise<NackResult> {
    const body = { ...leaseBody(lease), delay_ms: options.delayMs, reason: options.reason };
    const r = await this.http.call("POST /v1/topics/{topic}/jobs/{id}/nack", { path: pathOf(lease), body }, options);
    return nackResultFrom(r);
  }

  /** Extends a delivery's lease to `ttrMs` (default the job's ttr) from now; answers the new deadline. */
  async touch(lease: LeaseRef, options: CallOptions & { readonly ttrMs?: number } = {}): Promise<Date> {
    const body = { ...leaseBody(lease), ttr_ms: options.ttrMs };
    const r = await this.http.call("POST /v1/topics/{topic}/jobs/{id}/touch", { path: pathOf(lease), body }, options);
    return new Date(r.deadline_ms);
  }

  /** Sends a delivery's job to dead now, with `reason`. */
  async bury(lease: LeaseRef, options: CallOptions & { readonly reason?: string } = {}): Promise<void> {
    const body = { ...leaseBody(lease), reason: options.reason };
    await this.http.call("POST /v1/topics/{topic}/jobs/{id}/bury", { path: pathOf(lease), body }, options);
  }

  /** Gives a delivery back at once: ready again, the attempt not counted. */
  async release(lease: LeaseRef, options: CallOptions = {}): Promise<void> {
    const body = leaseBody(lease);
    await this.http.call("POST /v1/topics/{topic}/jobs/{id}/release", { path: pathOf(lease), body }, options);
  }
}

function pathOf(lease: LeaseRef): { topic: string; id: string } {
  return { topic: lease.topic, id: lease.id };
}

function leaseRefToWire(l: LeaseRef | string): { topic: string; id: string; token: number } {
  if (typeof l === "string" || l.token === undefined) {
    throw new TypeError("ackMany takes receipts, or leases that all have a token");
  }
  return { topic: l.topic, id: l.id, token: l.token };
}
