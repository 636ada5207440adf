/**
 * {@link Worker}: runs a handler for the jobs of some topics, as the Rust worker does.
 *
 * One loop makes every call to the server. Each call is a reserve that also carries the
 * settlements of the jobs finished since the last one (settle-in-reserve):
 *
 * - a **cycle** (settle, then reserve without waiting) when the window has room;
 * - a **long-poll** (reserve, waiting up to `waitMs`) after a reserve found nothing, so an
 *   idle worker waits in the server instead of polling; it carries no settlements, and
 *   beside it a **flush** (`max: 0`, settle only) sends what handlers finish meanwhile
 *   within a few milliseconds;
 * - a **flush** too when settlements are due and no reserve is.
 *
 * The jobs wait in a buffer for a free handler slot; the window (see `window.ts`) bounds
 * how many the worker holds, between the concurrency and concurrency + prefetch. A
 * buffered job whose lease runs below `minLeaseLeft` while every handler is busy is given
 * back. While a handler runs, its lease is renewed (see `renewal.ts`).
 *
 * Errors of a call (server unreachable, 503) pause the loop with a jittered back-off that
 * doubles up to `retryMaxMs`; the settlements it carried are sent again while their lease
 * lasts. Shutdown stops reserving at once, aborts an open long-poll, gives back the buffer
 * at once, waits up to `shutdownTimeoutMs` for running handlers, then aborts their signals
 * and gives their jobs back.
 *
 * Times are `performance.now()` milliseconds.
 *
 * @module
 */

import type { Client } from "../client.js";
import { DelayqError } from "../errors.js";
import type { Logger } from "../log.js";
import type { Delivery, Reserved } from "../job.js";
import type { Settlement } from "../types.js";
import { ShutdownError, failed, jobContext, type Handler, type Outcome } from "./handler.js";
import { MAX_BATCH, Outbox, type Pending, type Purpose } from "./outbox.js";
import { Renewal } from "./renewal.js";
import { settings, type Settings, type WorkerOptions } from "./options.js";
import { Tally, type Report } from "./report.js";
import { Wake } from "./wake.js";
import { Window } from "./window.js";

/** The most a release at shutdown is retried, so an unreachable server cannot hold the shutdown for a whole lease. */
const RELEASE_BUDGET_MS = 10_000;

/** A reply travels this share of the ttr (5 ms to 1 s) at most: taken off a long-poll's lease estimate. */
function replyMargin(ttrMs: number): number {
  return Math.min(1_000, Math.max(5, ttrMs / 50));
}

/** A job waiting in the buffer. */
interface Buffered {
  readonly delivery: Delivery;
  /** The estimated end of its lease. */
  readonly leaseEnd: number;
}

/** A job whose handler runs. */
interface Running {
  readonly delivery: Delivery;
  readonly controller: AbortController;
  readonly renewal: Renewal;
  readonly started: number;
  /** Why the lease was lost, once it was: the result is not settled. */
  lost: Error | undefined;
  /** Shutdown gave the job back: the result is not settled. */
  abandoned: boolean;
}

/** A call to the server on its way. */
interface Call {
  readonly kind: "cycle" | "poll" | "flush";
  readonly batch: readonly Pending[];
  readonly asked: number;
  readonly waitMs: number;
  readonly sent: number;
  readonly controller: AbortController;
  /** Shutdown abandoned it (an open long-poll): its answer is not waited for. */
  detached: boolean;
}

/**
 * Runs `handler` for the jobs of `topics`, up to `concurrency` at once.
 *
 * ```ts
 * const worker = new Worker(["orders.cancel"], async (job) => {
 *   const { order } = job.json<{ order: number }>();
 *   if (!(await orders.exists(order))) throw new PermanentError(`no order ${order}`);
 *   await orders.cancelIfUnpaid(order);
 * }, { concurrency: 20 });
 * const report = await worker.run(); // until SIGINT or SIGTERM
 * ```
 *
 * A handler that returns acks its job; one that throws nacks it (the server retries it
 * with the job's back-off, and sends it to dead after its last attempt). Long handlers
 * keep their lease: it is renewed at about half of it, and `context.signal` aborts when it
 * is lost.
 */
export class Worker {
  /** The client the worker calls the server with. */
  readonly client: Client;
  private readonly topics: readonly string[];
  private readonly handler: Handler;
  private readonly settings: Settings;
  private readonly log: Logger;

  private readonly window: Window;
  private readonly tally: Tally;
  private readonly outbox = new Outbox();
  private buffer: Buffered[] = [];
  private readonly running = new Set<Running>();
  /** The call that may reserve (or a flush when none is due). */
  private main: Call | undefined;
  /** A flush beside an open long-poll. */
  private side: Call | undefined;
  /**
   * A second cycle, sent while the main one is on its way when the window has room for
   * both, so that the server's work on one overlaps the worker's on the other.
   */
  private ahead: Call | undefined;
  /** Jobs asked for by calls on their way: they count against the window. */
  private askedOut = 0;
  /**
   * Settlements sent by calls on their way: still held until the server applied them,
   * which may come after another call's reserve (two requests are not ordered).
   */
  private settlingOut = 0;
  /** The last reserve found nothing: the next one long-polls. */
  private idle = true;
  /** No call starts before this (after a failed call). */
  private resumeAt = 0;
  /** The next pause after a failed call. */
  private pause: number;
  private stopping = false;
  /** When running handlers stop being waited for. */
  private graceEnd = Infinity;
  private done: Promise<Report> | undefined;
  private readonly wake = new Wake();

  /** A worker for `topics` (1 to 64 of them); it starts with {@link Worker.run} or {@link Worker.start}. */
  constructor(topics: readonly string[], handler: Handler, options: WorkerOptions = {}) {
    if (topics.length === 0) {
      throw new RangeError("a worker needs at least one topic");
    }
    this.topics = [...topics];
    this.handler = handler;
    this.settings = settings(options);
    this.client = this.settings.client;
    this.log = this.settings.logger;
    this.pause = this.settings.retryInitialMs;
    this.window = new Window(this.settings.concurrency, this.settings.concurrency + this.settings.prefetch);
    this.tally = new Tally(this.log);
  }

  /**
   * Runs until SIGINT or SIGTERM (a second one ends the wait for running handlers), then
   * shuts down gracefully; resolves with what the worker did.
   */
  async run(): Promise<Report> {
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals): void => {
      signals++;
      if (signals === 1) {
        this.log.info(`${signal}: shutting down`, { shutdownTimeoutMs: this.settings.shutdownTimeoutMs });
        void this.close();
      } else {
        this.log.warn(`${signal} again: giving back the jobs of the running handlers now`);
        this.graceEnd = performance.now();
        this.wake.notify();
      }
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    try {
      return await this.start();
    } finally {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    }
  }

  /** Starts the worker without installing signal handlers; resolves when it has stopped ({@link Worker.close}). */
  start(): Promise<Report> {
    this.done ??= this.loop();
    return this.done;
  }

  /**
   * Shuts down: stops reserving, gives back the buffered jobs at once, lets running
   * handlers finish within `shutdownTimeoutMs`, then gives their jobs back. Resolves when
   * everything the worker held is settled or given back.
   */
  close(): Promise<Report> {
    if (!this.stopping) {
      this.beginStop();
    }
    return this.start();
  }

  /** What the worker did so far. */
  report(): Report {
    return this.tally.report();
  }

  private async loop(): Promise<Report> {
    for (;;) {
      const now = performance.now();
      if (!this.stopping) {
        this.dispatch(now);
        this.giveBackLow(now);
      } else if (now >= this.graceEnd) {
        this.abandonRunning(now);
      }
      this.startCalls(now);
      if (this.finished()) {
        return this.tally.report();
      }
      await this.wake.wait(this.nextTimer(now));
    }
  }

  /** Leases the server holds for this worker once a cycle sent now has settled what it carries. */
  private held(): number {
    return this.buffer.length + this.running.size + this.settlingOut + Math.max(0, this.outbox.size - MAX_BATCH);
  }

  /** What a long-poll, which carries no settlements, holds while it waits. */
  private heldWhilePolling(): number {
    return this.buffer.length + this.running.size + this.settlingOut + this.outbox.size;
  }

  private finished(): boolean {
    return (
      this.stopping &&
      this.running.size === 0 &&
      this.outbox.size === 0 &&
      this.main === undefined &&
      this.side === undefined &&
      this.ahead === undefined
    );
  }

  /** The next timer: the end of a pause, the outbox's flush, a buffered job's lease running low, the end of the grace. */
  private nextTimer(now: number): number | undefined {
    if (this.resumeAt > now) {
      return this.resumeAt;
    }
    const canFlush = this.main === undefined || (this.main.kind === "poll" && this.side === undefined);
    const times = [canFlush ? this.outbox.flushAt() : undefined];
    if (this.stopping) {
      times.push(this.graceEnd);
    } else {
      times.push(this.nextLow());
    }
    const next = Math.min(...times.filter((t): t is number => t !== undefined && t > now));
    return Number.isFinite(next) ? next : undefined;
  }

  /** When a buffered job's lease has run below `minLeaseLeft`. */
  private lowAt(b: Buffered): number {
    return b.leaseEnd - b.delivery.job.ttrMs * this.settings.minLeaseLeft;
  }

  /** The first time a buffered job's lease runs low (jobs of topics with other ttrs may be out of order). */
  private nextLow(): number | undefined {
    let first: number | undefined;
    for (const b of this.buffer) {
      const at = this.lowAt(b);
      first = first === undefined || at < first ? at : first;
    }
    return first;
  }

  /** Hands buffered jobs to free handler slots. */
  private dispatch(now: number): void {
    while (this.running.size < this.settings.concurrency) {
      const b = this.buffer.shift();
      if (b === undefined) {
        return;
      }
      if (b.leaseEnd <= now) {
        this.log.warn("a buffered job's lease ended before a handler was free: the server will deliver it again", {
          topic: b.delivery.topic,
          id: b.delivery.id,
        });
        continue;
      }
      this.startHandler(b);
    }
  }

  /** Gives back buffered jobs whose lease ran low while every handler was busy, and holds fewer from now on. */
  private giveBackLow(now: number): void {
    const first = this.nextLow();
    if (first === undefined || first > now) {
      return;
    }
    const keep: Buffered[] = [];
    for (const b of this.buffer) {
      if (this.lowAt(b) <= now) {
        this.giveBack(b, "give-back", now);
      } else {
        keep.push(b);
      }
    }
    this.buffer = keep;
    this.window.shrinkTo(this.held());
  }

  private giveBack(b: Buffered, purpose: Purpose, now: number): void {
    if (b.leaseEnd <= now) {
      return;
    }
    const until = purpose === "release" ? Math.min(b.leaseEnd, now + RELEASE_BUDGET_MS) : b.leaseEnd;
    this.outbox.push({ settlement: { lease: b.delivery, outcome: "release" }, purpose, until }, now);
  }

  private startHandler(b: Buffered): void {
    const { delivery } = b;
    const controller = new AbortController();
    const policy = { fraction: this.settings.renewFraction, retryInitialMs: this.settings.retryInitialMs };
    const run: Running = {
      delivery,
      controller,
      started: performance.now(),
      lost: undefined,
      abandoned: false,
      renewal: new Renewal(this.client, delivery, delivery.job.ttrMs, b.leaseEnd, policy, this.log, (reason) => {
        run.lost = reason;
        controller.abort(reason);
      }),
    };
    this.running.add(run);
    const context = jobContext(controller.signal, delivery);
    new Promise<unknown>((ok) => ok(this.handler(delivery.job, context))).then(
      () => this.ended(run, { kind: "ack" }),
      (e: unknown) => this.ended(run, failed(e)),
    );
  }

  /** A handler ended with `outcome`: its settlement goes into the outbox, unless its lease or its job is no longer this worker's. */
  private ended(run: Running, outcome: Outcome): void {
    run.renewal.stop();
    const { topic, id } = run.delivery;
    if (run.abandoned) {
      this.log.warn("a handler ended after its job was given back at shutdown: its outcome is not recorded", {
        topic,
        id,
      });
      return;
    }
    this.running.delete(run);
    const now = performance.now();
    if (run.lost !== undefined) {
      this.tally.lost(topic, id, run.lost);
    } else {
      this.window.observe(now - run.started);
      const settlement: Settlement =
        outcome.kind === "ack"
          ? { lease: run.delivery, outcome: "ack" }
          : outcome.kind === "bury"
            ? { lease: run.delivery, outcome: "bury", reason: outcome.reason }
            : { lease: run.delivery, outcome: "nack", reason: outcome.reason, delayMs: outcome.delayMs };
      this.outbox.push({ settlement, purpose: outcome.kind, until: run.renewal.leaseEnd }, now);
    }
    this.wake.notify();
  }

  /** Starts the calls that are due. */
  private startCalls(now: number): void {
    if (this.resumeAt > now) {
      return;
    }
    const flushDue = (): boolean => this.outbox.size > 0 && (this.stopping || this.outbox.due(now));
    if (this.main === undefined) {
      const need = this.stopping ? 0 : Math.min(this.window.need(this.held() + this.askedOut), MAX_BATCH);
      const pollNeed = need === 0 ? 0 : Math.min(this.window.need(this.heldWhilePolling() + this.askedOut), MAX_BATCH);
      const refill = Math.max(1, Math.min(Math.floor(this.window.size / 2), MAX_BATCH));
      if (pollNeed > 0 && this.idle) {
        this.main = this.send("poll", [], pollNeed, this.settings.waitMs);
      } else if (need > 0 && (this.buffer.length === 0 || need >= refill || flushDue())) {
        this.main = this.send("cycle", this.outbox.take(), need, 0);
      } else if (flushDue()) {
        this.main = this.send("flush", this.outbox.take(), 0, 0);
        return;
      }
    }
    if (!this.stopping && !this.idle && this.ahead === undefined && this.main?.kind === "cycle") {
      const need = Math.min(this.window.need(this.held() + this.askedOut), MAX_BATCH);
      if (need >= Math.max(1, Math.floor(this.window.size / 2))) {
        this.ahead = this.send("cycle", this.outbox.take(), need, 0);
      }
    }
    if (this.main?.kind === "poll" && this.side === undefined && flushDue()) {
      this.side = this.send("flush", this.outbox.take(), 0, 0);
    }
  }

  private send(kind: Call["kind"], batch: Pending[], asked: number, waitMs: number): Call {
    const call: Call = {
      kind,
      batch,
      asked,
      waitMs,
      sent: performance.now(),
      controller: new AbortController(),
      detached: false,
    };
    this.askedOut += asked;
    this.settlingOut += batch.length;
    this.client
      .reserve(this.topics, {
        max: asked,
        waitMs: waitMs === 0 ? undefined : waitMs,
        settle: batch.map((p) => p.settlement),
        signal: call.controller.signal,
      })
      .then(
        (r) => this.finish(call, r),
        (e: unknown) => this.fail(call, e),
      )
      .finally(() => this.wake.notify());
    return call;
  }

  private release(call: Call): void {
    if (this.main === call) {
      this.main = undefined;
    } else if (this.side === call) {
      this.side = undefined;
    } else if (this.ahead === call) {
      this.ahead = undefined;
    }
    if (!call.detached) {
      this.askedOut -= call.asked;
    }
    this.settlingOut -= call.batch.length;
  }

  /** A call came back: answer its settlements, buffer its jobs, adjust the window. */
  private finish(call: Call, r: Reserved): void {
    this.release(call);
    const now = performance.now();
    this.pause = this.settings.retryInitialMs;
    call.batch.forEach((p, i) => {
      const settled = r.settled[i];
      if (settled === undefined) {
        this.tally.notRecorded(p, new DelayqError("bad_response", "the server answered fewer settlements than were sent"));
      } else {
        this.tally.answered(p, settled);
      }
    });
    if (call.asked === 0) {
      return;
    }
    const got = r.deliveries.length;
    if (!call.detached) {
      this.idle = got === 0;
      this.window.reserved(call.asked, Math.min(got, call.asked));
      if (got === 0 && call.kind === "poll" && now - call.sent < r.waitMs * 0.9) {
        // The server answers a long-poll empty before the wait it used only when it stops:
        // pause instead of asking again at once.
        this.resumeAt = now + this.settings.retryInitialMs;
      }
    }
    for (const delivery of r.deliveries) {
      const start = call.waitMs === 0 ? call.sent : Math.max(call.sent, now - replyMargin(delivery.job.ttrMs));
      const b = { delivery, leaseEnd: start + delivery.job.ttrMs };
      if (this.stopping || call.detached) {
        this.giveBack(b, "release", now);
      } else {
        this.buffer.push(b);
      }
    }
  }

  /** A call failed: pause, and send its settlements again while their lease lasts. */
  private fail(call: Call, e: unknown): void {
    this.release(call);
    if (call.detached) {
      return;
    }
    const now = performance.now();
    const pause = this.pause * (0.5 + Math.random() * 0.5);
    const retryable = e instanceof DelayqError && e.retryable;
    const fields = { error: e, retryInMs: Math.round(pause) };
    if (retryable) {
      this.log.warn("cannot reach the server: pausing", fields);
    } else {
      this.log.error("the server refused the worker's call: pausing", fields);
    }
    const again: Pending[] = [];
    for (const p of call.batch) {
      if (retryable && p.until > now + pause) {
        again.push(p);
      } else {
        this.tally.notRecorded(p, e instanceof DelayqError ? e : undefined);
      }
    }
    this.outbox.putBack(again, now);
    this.resumeAt = now + pause;
    this.pause = Math.min(this.pause * 2, this.settings.retryMaxMs);
  }

  /** Shutdown: no more jobs to handlers, no more reserves; the buffer goes back at once. */
  private beginStop(): void {
    const now = performance.now();
    this.stopping = true;
    this.graceEnd = now + this.settings.shutdownTimeoutMs;
    if (this.main?.kind === "poll") {
      // A long-poll carries no settlements: abandoning it loses nothing of ours.
      this.main.detached = true;
      this.askedOut -= this.main.asked;
      this.main.controller.abort();
      this.main = undefined;
    }
    if (this.buffer.length > 0) {
      this.log.info("shutdown: giving back the buffered jobs no handler started", { buffered: this.buffer.length });
    }
    for (const b of this.buffer) {
      this.giveBack(b, "release", now);
    }
    this.buffer = [];
    if (this.running.size > 0) {
      this.log.info("shutdown: waiting for running handlers", {
        running: this.running.size,
        shutdownTimeoutMs: this.settings.shutdownTimeoutMs,
      });
    }
    this.wake.notify();
  }

  /** The grace is over: abort the running handlers' signals and give their jobs back. */
  private abandonRunning(now: number): void {
    if (this.running.size === 0) {
      return;
    }
    this.log.warn("shutdown: timeout over, giving back the jobs of the handlers still running", {
      running: this.running.size,
    });
    for (const run of this.running) {
      run.abandoned = true;
      run.renewal.stop();
      if (run.lost === undefined) {
        const until = Math.min(run.renewal.leaseEnd, now + RELEASE_BUDGET_MS);
        this.outbox.push({ settlement: { lease: run.delivery, outcome: "release" }, purpose: "release", until }, now);
      }
      run.controller.abort(new ShutdownError());
    }
    this.running.clear();
  }
}
