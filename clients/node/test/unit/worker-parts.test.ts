/**
 * The worker's parts that need no server: the window, the outbox, how a handler's error
 * becomes an outcome, and the cut of a long reason.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { describe, it } from "node:test";

import { PermanentError, RetryError } from "../../src/index.js";
import { Delivery } from "../../src/job.js";
import type { DeliveryDto } from "../../src/openapi.js";
import { MAX_REASON, cutReason, failed, jobContext } from "../../src/worker/handler.js";
import { FLUSH_SIZE, LINGER_MS, MAX_BATCH, Outbox, type Pending } from "../../src/worker/outbox.js";
import { Window } from "../../src/worker/window.js";

function pending(id: string, until = 1_000): Pending {
  return { settlement: { lease: { topic: "t", id, token: 1 }, outcome: "ack" }, purpose: "ack", until };
}

describe("window", () => {
  it("starts at the concurrency and grows no further before a handler's speed is known", () => {
    const w = new Window(4, 20);
    assert.equal(w.size, 4);
    w.reserved(4, 4);
    assert.equal(w.size, 4);
    assert.equal(w.need(3), 1);
  });

  it("doubles on full reserves up to the capacity for fast handlers, and falls back on short ones", () => {
    const w = new Window(4, 20);
    w.observe(1);
    w.reserved(4, 4);
    assert.equal(w.size, 8);
    w.reserved(8, 8);
    w.reserved(16, 16);
    assert.equal(w.size, 20, "never above concurrency + prefetch");
    w.reserved(20, 6);
    assert.equal(w.size, 6);
    w.reserved(6, 0);
    assert.equal(w.size, 4, "never below the concurrency");
  });

  it("holds about 100 ms of work, and no more than it runs for slow handlers", () => {
    const w = new Window(4, 1_000);
    w.observe(10);
    for (let i = 0; i < 10; i++) {
      w.reserved(w.size, w.size);
    }
    assert.equal(w.size, 40, "4 handlers × 100 ms / 10 ms");
    for (let i = 0; i < 100; i++) {
      w.observe(5_000);
    }
    assert.equal(w.size, 4);
    w.shrinkTo(2);
    assert.equal(w.size, 4);
  });
});

describe("outbox", () => {
  it("holds settlements for a few ms, or sends a full batch at once", () => {
    const o = new Outbox();
    assert.equal(o.flushAt(), undefined);
    o.push(pending("a"), 100);
    assert.equal(o.flushAt(), 100 + LINGER_MS);
    assert.ok(!o.due(100) && o.due(100 + LINGER_MS));
    for (let i = 1; i < FLUSH_SIZE; i++) {
      o.push(pending(`j${i}`), 101);
    }
    assert.ok(o.due(100), "a full batch is due at once");
    assert.equal(o.take().length, FLUSH_SIZE);
    assert.equal(o.size, 0);
    assert.equal(o.flushAt(), undefined);
  });

  it("takes at most one call's worth, oldest first, and puts a failed call's back in front, due", () => {
    const o = new Outbox();
    for (let i = 0; i < MAX_BATCH + 5; i++) {
      o.push(pending(`j${i}`), 0);
    }
    const first = o.take();
    assert.equal(first.length, MAX_BATCH);
    assert.equal(first[0]?.settlement.lease.id, "j0");
    o.putBack(first.slice(0, 2), 50);
    assert.ok(o.due(50));
    assert.deepEqual(o.take().map((p) => p.settlement.lease.id).slice(0, 3), ["j0", "j1", `j${MAX_BATCH}`]);
  });
});

describe("job context", () => {
  it("names the attempt number `attempts`, as the API and the job do; `attempt` is a deprecated alias that warns once", async () => {
    const delivery = new Delivery(deliveryDto(3));
    const context = jobContext(new AbortController().signal, delivery);
    assert.equal(context.attempts, 3);
    assert.equal(context.attempts, delivery.job.attempts);
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(w);
    };
    process.on("warning", onWarning);
    try {
      assert.equal(context.attempt, 3);
      assert.equal(jobContext(new AbortController().signal, delivery).attempt, 3);
      // Warnings are emitted on the next tick.
      await new Promise((ok) => setImmediate(ok));
    } finally {
      process.off("warning", onWarning);
    }
    assert.deepEqual(
      warnings.map((w) => [w.name, (w as NodeJS.ErrnoException).code]),
      [["DeprecationWarning", "DELAYQ_ATTEMPT"]],
    );
  });
});

/** A delivery of attempt `attempts` as the server sends it. */
function deliveryDto(attempts: number): DeliveryDto {
  return {
    job: {
      topic: "t",
      id: "a",
      body: "x",
      encoding: "utf8",
      state: "reserved",
      priority: 0,
      ready_at: "1970-01-01T00:00:00Z",
      ready_at_ms: 0,
      ttr_ms: 30_000,
      max_attempts: 5,
      attempts,
      backoff: { kind: "fixed", base_ms: 1_000 },
      created_at: "2026-01-01T00:00:00Z",
      deadline_ms: 30_000,
    },
    token: 1,
    receipt: "r",
    lateness_ms: 0,
  };
}

describe("handler outcomes", () => {
  it("an exception nacks with its message; PermanentError buries; RetryError nacks with its delay", () => {
    assert.deepEqual(failed(new Error("payment API down")), { kind: "nack", reason: "payment API down", delayMs: undefined });
    assert.deepEqual(failed(new TypeError("")), { kind: "nack", reason: "TypeError", delayMs: undefined });
    assert.deepEqual(failed("a string"), { kind: "nack", reason: "handler threw a string", delayMs: undefined });
    assert.deepEqual(failed(new PermanentError("no such order")), { kind: "bury", reason: "no such order" });
    assert.deepEqual(failed(new RetryError("rate limited", { delayMs: 30_000 })), {
      kind: "nack",
      reason: "rate limited",
      delayMs: 30_000,
    });
  });

  it("cuts a reason to the server's 4 KiB at a character boundary", () => {
    assert.equal(cutReason("short"), "short");
    const exact = "x".repeat(MAX_REASON);
    assert.equal(cutReason(exact), exact);
    for (const long of ["é".repeat(MAX_REASON), "x" + "€".repeat(MAX_REASON), "😀".repeat(MAX_REASON)]) {
      const cut = cutReason(long);
      assert.ok(Buffer.byteLength(cut, "utf8") <= MAX_REASON, String(Buffer.byteLength(cut)));
      assert.ok(cut.endsWith("...") && !cut.includes("\uFFFD"));
    }
  });
});
