/**
 * The worker against a real `delayq serve`, on each engine: the concurrency limit and the
 * bound on held jobs, lease renewal, a lost lease, retries and dead jobs, shutdown on
 * SIGTERM, a killed worker's jobs, and a server that goes away and comes back.
 *
 * Timing tests assert outcomes with wide margins (a job came back well before its ttr, or
 * not before it), never tight durations.
 *
 * @module
 */

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import {
  Client,
  LeaseLostError,
  NotFoundError,
  PermanentError,
  RetryError,
  Worker,
  consoleLogger,
  type Delivery,
  type Logger,
  type Report,
} from "../../src/index.js";
import {
  DelayqServer,
  ENGINES,
  NodeChild,
  RedisServer,
  freePort,
  sleep,
  topicName,
  waitUntil,
} from "../harness.js";

const quiet = consoleLogger("silent");

/** A logger that keeps the warnings it is given. */
function recording(): { logger: Logger; warnings: string[] } {
  const warnings: string[] = [];
  const skip = (): void => undefined;
  return { warnings, logger: { debug: skip, info: skip, warn: (m) => warnings.push(m), error: skip } };
}

/** Reserves from `topic` until `n` deliveries came or `ms` passed. */
async function collect(client: Client, topic: string, n: number, ms: number): Promise<Delivery[]> {
  const got: Delivery[] = [];
  const deadline = Date.now() + ms;
  while (got.length < n && Date.now() < deadline) {
    const r = await client.reserve([topic], { max: n - got.length, waitMs: Math.max(1, deadline - Date.now()) });
    got.push(...r.deliveries);
  }
  return got;
}

/** Runs `worker` while `body` runs, and closes it even when `body` fails; answers its report. */
async function whileRunning(worker: Worker, body: () => Promise<void>): Promise<Report> {
  const done = worker.start();
  try {
    await body();
  } finally {
    await worker.close();
  }
  return done;
}

/** Starts the worker of `test/fixtures/worker-child.ts` in a process of its own. */
function childWorker(server: DelayqServer, topic: string, settings: Record<string, string>): NodeChild {
  return NodeChild.start("test/fixtures/worker-child.js", [], {
    DELAYQ_SERVER: server.url,
    WORKER_TOPIC: topic,
    ...settings,
  });
}

function reportOf(child: NodeChild): Report {
  const m = child.output().match(/^report (.*)$/m);
  assert.ok(m?.[1] !== undefined, `the child printed no report:\n${child.output()}`);
  return JSON.parse(m[1]) as Report;
}

for (const engine of ENGINES) {
  describe(`worker (${engine})`, () => {
    let server: DelayqServer;
    let client: Client;

    before(async () => {
      server = await DelayqServer.start({ engine });
      client = new Client({ url: server.url });
    });

    after(async () => {
      await server.stop();
    });

    it("runs at most `concurrency` handlers at once and holds at most concurrency + prefetch jobs", { timeout: 30_000 }, async () => {
      const topic = topicName("concurrency");
      await client.pushBatch(
        topic,
        Array.from({ length: 40 }, (_, i) => ({ body: `job ${i}` })),
      );
      let active = 0;
      let most = 0;
      const worker = new Worker(
        [topic],
        async () => {
          active++;
          most = Math.max(most, active);
          await sleep(20);
          active--;
        },
        { client, concurrency: 3, prefetch: 2, logger: quiet },
      );
      let mostReserved = 0;
      const report = await whileRunning(worker, () =>
        waitUntil(
          async () => {
            mostReserved = Math.max(mostReserved, (await client.stats(topic)).reserved);
            return worker.report().acked === 40;
          },
          20_000,
          "40 acks",
        ),
      );
      assert.equal(most, 3, "the handlers ran 3 at once, never more");
      assert.ok(mostReserved <= 5, `the server saw ${mostReserved} jobs reserved at once, over 3 + 2`);
      assert.deepEqual(report, { acked: 40, retried: 0, dead: 0, buried: 0, released: 0, leaseLost: 0, failed: 0 });
      const s = await client.stats(topic);
      assert.equal(s.ready + s.reserved + s.delayed + s.dead, 0);
    });

    it("sends an ack while its long-poll waits, not when the long-poll ends", { timeout: 30_000 }, async () => {
      const topic = topicName("idle-ack");
      await client.push(topic, "x", { id: "a" });
      let ended = 0;
      const worker = new Worker(
        [topic],
        async () => {
          // Long enough for the worker to find nothing more and long-poll meanwhile.
          await sleep(1_000);
          ended = Date.now();
        },
        { client, concurrency: 2, waitMs: 30_000, logger: quiet },
      );
      await whileRunning(worker, async () => {
        await waitUntil(() => ended > 0, 10_000, "the handler's end");
        const gone = async (): Promise<boolean> =>
          client.get(topic, "a").then(
            () => false,
            (e: unknown) => e instanceof NotFoundError,
          );
        await waitUntil(gone, 3_000, "the ack, well within the 30 s long-poll");
      });
    });

    it("renews the lease of a handler that runs 3× its ttr", { timeout: 30_000 }, async () => {
      const topic = topicName("renew");
      // One attempt: a lapsed lease would send the job to dead instead of redelivering it.
      await client.push(topic, "long", { id: "long", ttrMs: 1_000, maxAttempts: 1 });
      let calls = 0;
      let aborted = false;
      const worker = new Worker(
        [topic],
        async (_job, { signal }) => {
          calls++;
          await sleep(3_000);
          aborted = signal.aborted;
        },
        { client, concurrency: 1, logger: quiet },
      );
      await whileRunning(worker, () => waitUntil(() => worker.report().acked === 1, 15_000, "the ack"));
      assert.equal(calls, 1);
      assert.equal(aborted, false);
      const s = await client.stats(topic);
      assert.equal(s.expiredLeases, 0, "the lease never ran out");
      assert.equal(s.dead, 0);
      await assert.rejects(client.get(topic, "long"), NotFoundError);
    });

    it("aborts the handler's signal when its lease is lost, and settles nothing", { timeout: 30_000 }, async () => {
      const topic = topicName("lost");
      await client.push(topic, "doomed", { id: "doomed", ttrMs: 1_000 });
      let started = false;
      let reason: unknown;
      const worker = new Worker(
        [topic],
        async (_job, { signal }) => {
          started = true;
          await new Promise<void>((ok) => {
            const timer = setTimeout(ok, 10_000);
            signal.addEventListener("abort", () => {
              clearTimeout(timer);
              reason = signal.reason;
              ok();
            });
          });
        },
        { client, concurrency: 1, logger: quiet },
      );
      const report = await whileRunning(worker, async () => {
        await waitUntil(() => started, 10_000, "the handler's start");
        await client.delete(topic, "doomed");
        await waitUntil(() => worker.report().leaseLost === 1, 10_000, "the lost lease");
      });
      assert.ok(reason instanceof NotFoundError || reason instanceof LeaseLostError, `aborted with ${String(reason)}`);
      assert.equal(report.acked, 0);
      assert.equal(report.failed, 0);
    });

    it("retries a handler that throws with the back-off, then sends it to dead; buries on PermanentError", { timeout: 30_000 }, async () => {
      const topic = topicName("failures");
      const fast = { kind: "fixed", baseMs: 100 } as const;
      await client.push(topic, "x", { id: "flaky", maxAttempts: 2, backoff: fast });
      await client.push(topic, "x", { id: "hopeless", maxAttempts: 5 });
      await client.push(topic, "x", { id: "later", maxAttempts: 5 });
      const flakyAttempts: number[] = [];
      const worker = new Worker(
        [topic],
        (job, context) => {
          switch (job.id) {
            case "flaky":
              flakyAttempts.push(context.attempts);
              throw new Error("payment API down");
            case "hopeless":
              throw new PermanentError("no such order");
            default:
              throw new RetryError("rate limited", { delayMs: 60_000 });
          }
        },
        { client, concurrency: 2, logger: quiet },
      );
      const report = await whileRunning(worker, () =>
        waitUntil(
          () => {
            const r = worker.report();
            return r.dead === 1 && r.buried === 1 && r.retried === 2;
          },
          15_000,
          "one dead, one buried, two retries",
        ),
      );
      assert.deepEqual(report, { acked: 0, retried: 2, dead: 1, buried: 1, released: 0, leaseLost: 0, failed: 0 });

      const flaky = await client.get(topic, "flaky");
      assert.equal(flaky.state, "dead");
      assert.equal(flaky.attempts, 2);
      assert.deepEqual(flakyAttempts, [1, 2], "each delivery's context.attempts");
      assert.equal(flaky.lastError, "payment API down");
      const hopeless = await client.get(topic, "hopeless");
      assert.equal(hopeless.state, "dead");
      assert.equal(hopeless.attempts, 1);
      assert.equal(hopeless.lastError, "no such order");
      const later = await client.get(topic, "later");
      assert.equal(later.state, "delayed");
      assert.equal(later.lastError, "rate limited");
      assert.ok(later.readyAt.getTime() > Date.now() + 40_000, `due again at ${later.readyAt.toISOString()}`);
    });

    it("on SIGTERM mid-batch gives its buffered and running jobs back to another worker at once", { timeout: 60_000 }, async () => {
      const topic = topicName("sigterm");
      // Quick jobs first (lower priority values run first), so the worker learns that its
      // handlers are fast and holds more jobs than it runs; then more jobs that run until
      // stopped than it can hold, so its reserves keep coming back full.
      await client.pushBatch(topic, [
        ...Array.from({ length: 20 }, (_, i) => ({ body: "quick", id: `quick-${i}`, priority: 0 })),
        ...Array.from({ length: 15 }, (_, i) => ({ body: "slow", id: `slow-${i}`, priority: 1, ttrMs: 30_000 })),
      ]);
      const child = childWorker(server, topic, {
        WORKER_CONCURRENCY: "2",
        WORKER_PREFETCH: "3",
        WORKER_SHUTDOWN_MS: "500",
        WORKER_HANDLER: "forever",
      });
      try {
        await child.waitFor(/started slow-\d+[\s\S]*started slow-\d+/, 20_000);
        let held: string[] = [];
        await waitUntil(
          async () => {
            held = (await client.list(topic, "reserved")).jobs.map((j) => j.id);
            // 2 running and at least one buffered; how many more the window holds (up to
            // the prefetch of 3) depends on how fast the quick handlers looked on this machine.
            return held.length >= 3 && held.every((id) => id.startsWith("slow-"));
          },
          20_000,
          "the child holding 2 running jobs and buffered ones",
        );
        const stopped = Date.now();
        child.signal("SIGTERM");
        const back = await collect(client, topic, 15, 10_000);
        const elapsed = Date.now() - stopped;
        const ids = new Set(back.map((d) => d.id));
        assert.equal(ids.size, 15, `got back ${[...ids].join(", ")}`);
        for (const id of held) {
          assert.ok(ids.has(id), `${id}, held by the child, came back`);
        }
        assert.ok(elapsed < 10_000, `back after ${elapsed} ms: a release, not the 30 s ttr`);
        for (const d of back) {
          assert.equal(d.job.attempts, 1, `${d.id} was released (attempt not counted), not expired`);
          await client.ack(d);
        }
        assert.ok(await child.waitExit(10_000), "the child exits");
        assert.equal(child.exitCode, 0, child.output());
        const report = reportOf(child);
        assert.ok(report.released >= held.length && report.released <= 5, child.output());
        assert.equal(report.acked, 20);
      } finally {
        await child.stop();
      }
    });

    it("on SIGTERM lets a running handler finish within the shutdown timeout, and acks it", { timeout: 30_000 }, async () => {
      const topic = topicName("finish");
      await client.push(topic, "x", { id: "a" });
      const child = childWorker(server, topic, {
        WORKER_CONCURRENCY: "1",
        WORKER_PREFETCH: "0",
        WORKER_SHUTDOWN_MS: "10000",
        WORKER_HANDLER: "sleep:1500",
      });
      try {
        await child.waitFor(/started a/, 15_000);
        child.signal("SIGTERM");
        assert.ok(await child.waitExit(15_000), "the child exits");
        assert.equal(child.exitCode, 0, child.output());
        assert.match(child.output(), /finished a/);
        assert.equal(reportOf(child).acked, 1);
        await assert.rejects(client.get(topic, "a"), NotFoundError);
      } finally {
        await child.stop();
      }
    });

    it("a killed worker's jobs come back after their ttr, not before", { timeout: 60_000 }, async () => {
      const topic = topicName("killed");
      const ttrMs = 2_000;
      const pushed = Date.now();
      await client.pushBatch(topic, [
        { body: "x", id: "k0", ttrMs, backoff: { kind: "fixed", baseMs: 0 } },
        { body: "x", id: "k1", ttrMs, backoff: { kind: "fixed", baseMs: 0 } },
      ]);
      const child = childWorker(server, topic, {
        WORKER_CONCURRENCY: "2",
        WORKER_PREFETCH: "0",
        WORKER_SHUTDOWN_MS: "1000",
        WORKER_HANDLER: "forever",
      });
      try {
        await child.waitFor(/started k\d[\s\S]*started k\d/, 15_000);
        child.signal("SIGKILL");
        assert.ok(await child.waitExit(5_000));
        const killed = Date.now();
        // Reserved after the push, so their leases end at least a ttr after it.
        const early = await client.reserve([topic], { max: 2, waitMs: Math.max(0, pushed + ttrMs - 500 - Date.now()) });
        assert.equal(early.deliveries.length, 0, "nothing comes back before the ttr");
        const back = await collect(client, topic, 2, 15_000);
        const after = Date.now();
        assert.deepEqual(back.map((d) => d.id).sort(), ["k0", "k1"]);
        assert.ok(after - pushed >= ttrMs - 100, `back ${after - pushed} ms after the push, before the ttr`);
        assert.ok(after - killed < ttrMs + 10_000, `back ${after - killed} ms after the kill`);
        for (const d of back) {
          assert.equal(d.job.attempts, 2, "the lapsed lease counts as an attempt");
          await client.ack(d);
        }
      } finally {
        await child.stop();
      }
    });

    it("keeps running while the server is away, and carries on when it is back", { timeout: 60_000 }, async () => {
      const topic = topicName("outage");
      const port = await freePort();
      const dataDir = mkdtempSync(join(tmpdir(), "delayq-node-outage-"));
      const redis = engine === "redis" ? await RedisServer.start() : undefined;
      const options = { engine, port, dataDir, ...(redis === undefined ? {} : { redisUrl: redis.url }) };
      let own = await DelayqServer.start(options);
      const local = new Client({ url: own.url, timeoutMs: 2_000 });
      const handled: string[] = [];
      const { logger, warnings } = recording();
      const worker = new Worker([topic], (job) => void handled.push(job.id), {
        client: local,
        waitMs: 1_000,
        retryInitialMs: 50,
        retryMaxMs: 500,
        logger,
      });
      try {
        await whileRunning(worker, async () => {
          await local.push(topic, "x", { id: "before" });
          await waitUntil(() => worker.report().acked === 1, 10_000, "the first job");
          await own.stop();
          await waitUntil(() => warnings.some((w) => w.includes("cannot reach the server")), 10_000, "a warning");
          await sleep(1_000);
          own = await DelayqServer.start(options);
          await local.push(topic, "x", { id: "after" });
          await waitUntil(() => worker.report().acked === 2, 15_000, "the job pushed after the restart");
        });
        assert.deepEqual(handled, ["before", "after"]);
      } finally {
        await own.stop();
        await redis?.stop();
        rmSync(dataDir, { recursive: true, force: true });
      }
    });
  });
}
