/**
 * Every call of the {@link Client} against a real `delayq serve`, on each engine: the
 * producer's (push one or a batch, get, delete, reschedule, list with cursor paging, stats,
 * dead jobs, kick, archive, purge, pause and resume, topic settings, schedules) and the
 * consumer's (reserve with settlements, ack by delivery, receipt or in a batch, nack,
 * touch, bury, release, at most once).
 *
 * @module
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Client, InvalidArgumentError, LeaseLostError, NotFoundError, type Delivery } from "../../src/index.js";
import { DelayqServer, ENGINES, topicName } from "../harness.js";

const HOUR = 3_600_000;

for (const engine of ENGINES) {
  describe(`client (${engine})`, () => {
    let server: DelayqServer;
    let client: Client;

    before(async () => {
      server = await DelayqServer.start({ engine });
      client = new Client({ url: server.url });
    });

    after(async () => {
      await server.stop();
    });

    /** Takes the one ready job of `topic`. */
    async function take(topic: string): Promise<Delivery> {
      const r = await client.reserve([topic], { max: 1, waitMs: 5_000 });
      const [d] = r.deliveries;
      assert.ok(d !== undefined, "a job was due");
      return d;
    }

    it("push: a delay, an absolute time, options, an idempotent id, replace", async () => {
      const topic = topicName("push");
      const before = Date.now();
      const a = await client.push(topic, "cancel order 42", { id: "order-42", delayMs: HOUR });
      assert.deepEqual([a.id, a.created, a.replaced, a.state], ["order-42", true, false, "delayed"]);
      assert.ok(a.readyAt.getTime() >= before + HOUR - 1_000 && a.readyAt.getTime() <= Date.now() + HOUR + 1_000);

      const again = await client.push(topic, "something else", { id: "order-42", delayMs: 1 });
      assert.deepEqual([again.created, again.replaced], [false, false], "a live id keeps its job");
      assert.equal((await client.get(topic, "order-42")).text(), "cancel order 42");

      const replaced = await client.push(topic, "cancel order 42, v2", { id: "order-42", delayMs: HOUR, onConflict: "replace" });
      assert.equal(replaced.replaced, true);
      assert.equal((await client.get(topic, "order-42")).text(), "cancel order 42, v2");

      const at = new Date(Date.now() + 2 * HOUR);
      const b = await client.push(topic, "at", {
        at,
        priority: 7,
        ttrMs: 5_000,
        maxAttempts: 9,
        backoff: { kind: "exponential", baseMs: 2_000, factor: 3, maxMs: 60_000, jitter: 0 },
        maxLatenessMs: 60_000,
      });
      assert.equal(b.readyAt.getTime(), at.getTime());
      const job = await client.get(topic, b.id);
      assert.deepEqual(
        [job.priority, job.ttrMs, job.maxAttempts, job.state, job.attempts],
        [7, 5_000, 9, "delayed", 0],
      );
      assert.deepEqual(job.backoff, { kind: "exponential", baseMs: 2_000, factor: 3, maxMs: 60_000, jitter: 0 });
      assert.equal(job.expiresAt?.getTime(), at.getTime() + 60_000);
      assert.equal(job.onExpire, "dead");
    });

    it("push: a binary body goes as base64 and comes back as the same bytes", async () => {
      const topic = topicName("binary");
      const bytes = new Uint8Array([0, 1, 2, 0xff, 0xfe, 0x80]);
      const { id } = await client.push(topic, bytes);
      const job = await client.get(topic, id);
      assert.equal(job.encoding, "base64");
      assert.deepEqual([...job.bytes()], [...bytes]);
      await client.push(topic, JSON.stringify({ order: 42 }), { id: "json" });
      assert.deepEqual((await client.get(topic, "json")).json(), { order: 42 });
    });

    it("pushBatch answers each job in order", async () => {
      const topic = topicName("batch");
      const results = await client.pushBatch(topic, [
        { body: "a", id: "a" },
        { body: "b", id: "b", delayMs: HOUR },
        { body: "a again", id: "a" },
      ]);
      assert.deepEqual(
        results.map((r) => [r.id, r.created, r.state]),
        [
          ["a", true, "ready"],
          ["b", true, "delayed"],
          ["a", false, "ready"],
        ],
      );
    });

    it("get, delete and reschedule a job", async () => {
      const topic = topicName("jobs");
      await client.push(topic, "x", { id: "j", delayMs: HOUR });
      const soon = await client.reschedule(topic, "j", { delayMs: 60_000 });
      assert.ok(Math.abs(soon.getTime() - (Date.now() + 60_000)) < 5_000, soon.toISOString());
      const at = new Date(Date.now() + 3 * HOUR);
      assert.equal((await client.reschedule(topic, "j", { at })).getTime(), at.getTime());
      assert.equal((await client.get(topic, "j")).readyAt.getTime(), at.getTime());
      await client.delete(topic, "j");
      await assert.rejects(client.get(topic, "j"), NotFoundError);
      await assert.rejects(client.delete(topic, "j"), NotFoundError);
      // Ids go percent-encoded in paths: a / or a ? is part of the id.
      await client.push(topic, "x", { id: "shop/42?x=1%" });
      assert.equal((await client.get(topic, "shop/42?x=1%")).id, "shop/42?x=1%");
      await client.delete(topic, "shop/42?x=1%");
    });

    it("list pages through a state with a cursor, filters by prefix, and jobs() walks every page", async () => {
      const topic = topicName("list");
      await client.pushBatch(
        topic,
        [0, 1, 2, 3, 4].map((i) => ({ body: "x", id: `order-${i}`, delayMs: HOUR + i * 1_000 })),
      );
      await client.push(topic, "x", { id: "other", delayMs: 2 * HOUR });
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await client.list(topic, "delayed", { limit: 2, cursor });
        assert.ok(page.jobs.length <= 2);
        seen.push(...page.jobs.map((j) => j.id));
        cursor = page.nextCursor;
        pages++;
      } while (cursor !== undefined);
      assert.deepEqual(seen, ["order-0", "order-1", "order-2", "order-3", "order-4", "other"]);
      assert.ok(pages >= 3);
      const prefixed = await client.list(topic, "delayed", { prefix: "order-" });
      assert.deepEqual(prefixed.jobs.map((j) => j.id), ["order-0", "order-1", "order-2", "order-3", "order-4"]);
      const walked: string[] = [];
      for await (const job of client.jobs(topic, "delayed", { limit: 4 })) {
        walked.push(job.id);
      }
      assert.deepEqual(walked, seen);
    });

    it("stats and topics count each state", async () => {
      const topic = topicName("stats");
      await client.pushBatch(topic, [
        { body: "x", delayMs: HOUR },
        { body: "x" },
        { body: "x" },
      ]);
      await take(topic);
      const s = await client.stats(topic);
      assert.deepEqual([s.topic, s.delayed, s.ready, s.reserved, s.dead, s.paused], [topic, 1, 1, 1, 0, false]);
      assert.ok(s.nextDue instanceof Date);
      const all = await client.topics();
      assert.ok(all.some((t) => t.topic === topic && t.delayed === 1));
    });

    it("dead jobs: archive, the dead list, kick one, kick all", async () => {
      const topic = topicName("dead");
      await client.pushBatch(topic, [
        { body: "x", id: "a" },
        { body: "x", id: "b" },
        { body: "x", id: "c" },
      ]);
      for (const id of ["a", "b", "c"]) {
        await client.archive(topic, id, { reason: `archived ${id}` });
      }
      const dead = await client.dead(topic);
      assert.deepEqual(dead.jobs.map((j) => [j.id, j.lastError]), [
        ["a", "archived a"],
        ["b", "archived b"],
        ["c", "archived c"],
      ]);
      await client.kick(topic, "a");
      assert.equal((await client.get(topic, "a")).state, "ready");
      assert.equal(await client.kickAll(topic), 2);
      assert.equal((await client.stats(topic)).ready, 3);
    });

    it("purge removes every job of a topic", async () => {
      const topic = topicName("purge");
      await client.pushBatch(topic, [{ body: "x" }, { body: "x", delayMs: HOUR }]);
      assert.equal(await client.purge(topic), 2);
      const s = await client.stats(topic);
      assert.equal(s.ready + s.delayed, 0);
      assert.ok(!(await client.topics()).some((t) => t.topic === topic));
    });

    it("pause stops handing out a topic's jobs until resumed", async () => {
      const topic = topicName("pause");
      await client.push(topic, "x", { id: "p" });
      const paused = await client.pause(topic);
      assert.deepEqual(paused, { paused: true, until: undefined });
      assert.equal((await client.stats(topic)).paused, true);
      assert.equal((await client.reserve([topic], { max: 1, waitMs: 300 })).deliveries.length, 0);
      const timed = await client.pause(topic, { forMs: HOUR });
      assert.ok(timed.until !== undefined && timed.until.getTime() > Date.now() + HOUR - 60_000);
      await client.resume(topic);
      assert.equal((await client.stats(topic)).paused, false);
      assert.equal((await take(topic)).id, "p");
    });

    it("topic settings: the defaults of the jobs pushed without their own", async () => {
      const topic = topicName("settings");
      const set = await client.setTopicSettings(topic, {
        ttrMs: 60_000,
        maxAttempts: 5,
        backoff: { kind: "fixed", baseMs: 10_000 },
        maxBody: 1_000,
        retention: { maxJobs: 10, maxAgeMs: 60_000 },
      });
      assert.equal(set.ttrMs, 60_000);
      assert.deepEqual(await client.topicSettings(topic), set);
      const { id } = await client.push(topic, "x");
      const job = await client.get(topic, id);
      assert.deepEqual([job.ttrMs, job.maxAttempts, job.backoff.kind, job.backoff.baseMs], [60_000, 5, "fixed", 10_000]);
      assert.deepEqual(await client.setTopicSettings(topic, {}), {
        ttrMs: undefined,
        maxAttempts: undefined,
        backoff: undefined,
        maxBody: undefined,
        retention: undefined,
      });
    });

    it("schedules: put, get, list, delete", async () => {
      const name = topicName("nightly");
      const topic = topicName("reports");
      const s = await client.putSchedule(name, { cron: "30 2 * * *", timeZone: "Europe/Berlin", topic, body: "build it" });
      assert.deepEqual([s.name, s.cron, s.timeZone, s.topic, s.revision], [name, "30 2 * * *", "Europe/Berlin", topic, 1]);
      assert.ok(s.nextFire instanceof Date && s.nextFire.getTime() > Date.now());
      assert.equal((await client.getSchedule(name)).revision, 1);
      assert.ok((await client.schedules()).some((x) => x.name === name));
      assert.equal((await client.deleteSchedule(name)).name, name);
      await assert.rejects(client.getSchedule(name), NotFoundError);
    });

    it("schedules carry their jobs' expiry, and refuse two at once naming the field", async () => {
      const name = topicName("expiring");
      const topic = topicName("reminders");
      const s = await client.putSchedule(name, { cron: "*/10 * * * * *", topic, maxLatenessMs: 30_000, onExpire: "drop" });
      assert.deepEqual([s.maxLatenessMs, s.expiresAt, s.onExpire], [30_000, undefined, "drop"]);
      const read = await client.getSchedule(name);
      assert.deepEqual([read.maxLatenessMs, read.onExpire], [30_000, "drop"]);
      const at = new Date(Date.now() + 3_600_000);
      const both = client.putSchedule(name, { cron: "*/10 * * * * *", topic, maxLatenessMs: 1_000, expiresAt: at });
      await assert.rejects(both, (e: unknown) => e instanceof InvalidArgumentError && /expires_at|max_lateness/.test(e.field ?? ""));
      assert.equal((await client.getSchedule(name)).maxLatenessMs, 30_000, "the refused put changed the schedule");
      const until = await client.putSchedule(name, { cron: "*/10 * * * * *", topic, expiresAt: at });
      assert.equal(until.expiresAt?.getTime(), at.getTime());
      await client.deleteSchedule(name);
    });

    it("reserve settles in the same request, answering each settlement", async () => {
      const topic = topicName("settle");
      await client.pushBatch(topic, [
        { body: "x", id: "a" },
        { body: "x", id: "b", maxAttempts: 3 },
        { body: "x", id: "c" },
        { body: "x", id: "d" },
      ]);
      const first = await client.reserve([topic], { max: 4 });
      assert.equal(first.deliveries.length, 4);
      assert.deepEqual(first.unreachable, [], "one node reaches every topic (issue 37)");
      const [a, b, c, d] = first.deliveries as [Delivery, Delivery, Delivery, Delivery];
      assert.equal(a.job.attempts, 1);
      assert.ok(a.receipt !== undefined && a.token !== undefined && a.latenessMs >= 0);
      const stale = { topic, id: "zzz", token: 1 };
      const second = await client.reserve([topic], {
        max: 0,
        settle: [
          { lease: a, outcome: "ack" },
          { lease: b, outcome: "nack", delayMs: HOUR, reason: "payment API down" },
          { lease: c, outcome: "bury", reason: "no such order" },
          { lease: d, outcome: "release" },
          { lease: stale, outcome: "ack" },
        ],
      });
      assert.equal(second.deliveries.length, 0);
      assert.deepEqual(
        second.settled.map((s) => [s.ok, s.outcome, s.error?.code]),
        [
          [true, undefined, undefined],
          [true, "retry", undefined],
          [true, undefined, undefined],
          [true, undefined, undefined],
          [false, undefined, "not_found"],
        ],
      );
      assert.ok(second.settled[4]?.error instanceof NotFoundError);
      assert.ok((second.settled[1]?.readyAt?.getTime() ?? 0) > Date.now() + HOUR - 60_000);
      await assert.rejects(client.get(topic, "a"), NotFoundError);
      assert.deepEqual([(await client.get(topic, "b")).state, (await client.get(topic, "b")).lastError], ["delayed", "payment API down"]);
      assert.equal((await client.get(topic, "c")).state, "dead");
      const again = await take(topic);
      assert.deepEqual([again.id, again.job.attempts], ["d", 1], "a release does not count the attempt");
    });

    it("lease calls: ack by delivery and by receipt, ackMany, nack, touch, bury, release", async () => {
      const topic = topicName("lease");
      await client.pushBatch(topic, ["a", "b", "c", "d", "e", "f", "g"].map((id) => ({ body: "x", id, ttrMs: 5_000 })));
      const got = (await client.reserve([topic], { max: 7 })).deliveries;
      const by = (id: string): Delivery => got.find((d) => d.id === id) as Delivery;

      await client.ack(by("a"));
      await client.ack(by("b").receipt as string);
      const many = await client.ackMany([by("c").receipt as string, by("d")]);
      assert.deepEqual(many.map((r) => r.ok), [true, true]);
      const byLease = await client.ackMany([{ topic, id: "c", token: by("c").token as number }]);
      assert.ok(byLease[0]?.error instanceof NotFoundError, "acked already: gone");

      const nacked = await client.nack(by("e"), { delayMs: HOUR, reason: "later" });
      assert.equal(nacked.outcome, "retry");
      assert.ok(nacked.readyAt !== undefined && nacked.readyAt.getTime() > Date.now() + HOUR - 60_000);
      await assert.rejects(client.ack(by("e")), LeaseLostError, "the nacked delivery's lease is gone");

      const before = (await client.get(topic, "f")).deadline?.getTime() ?? 0;
      const deadline = await client.touch(by("f"), { ttrMs: 60_000 });
      assert.ok(deadline.getTime() > before + 30_000, "touch moved the deadline on");
      await client.bury(by("f"), { reason: "no such order" });
      const f = await client.get(topic, "f");
      assert.deepEqual([f.state, f.lastError], ["dead", "no such order"]);

      await client.release({ topic, id: "g", receipt: by("g").receipt });
      assert.equal((await client.get(topic, "g")).state, "ready");
      for (const id of ["a", "b", "c", "d"]) {
        await assert.rejects(client.get(topic, id), NotFoundError);
      }
    });

    it("reserve at most once: no lease, the job is gone", async () => {
      const topic = topicName("amo");
      await client.push(topic, "x", { id: "once" });
      const r = await client.reserve([topic], { max: 1, atMostOnce: true });
      assert.equal(r.deliveries.length, 1);
      assert.equal(r.deliveries[0]?.token, undefined);
      assert.equal(r.deliveries[0]?.receipt, undefined);
      await assert.rejects(client.get(topic, "once"), NotFoundError);
    });
  });
}
