/**
 * The conversions between the client's types and the wire: times, bodies, settlements,
 * and the client's settings from the environment.
 *
 * @module
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Client, DEFAULT_TIMEOUT_MS } from "../../src/index.js";
import { bodyToWire, leaseBody, pushToWire, reservedFrom, rfc3339, settlementToWire } from "../../src/wire.js";

describe("conversions", () => {
  it("times: a Date, ms since the epoch, or an RFC 3339 string", () => {
    assert.equal(rfc3339(new Date(Date.UTC(2026, 0, 2, 15, 4, 5, 6))), "2026-01-02T15:04:05.006Z");
    assert.equal(rfc3339(0), "1970-01-01T00:00:00.000Z");
    assert.equal(rfc3339("2026-01-02T15:04:05+01:00"), "2026-01-02T15:04:05+01:00");
    assert.throws(() => rfc3339(new Date(Number.NaN)), RangeError);
  });

  it("bodies: text as it is, bytes as base64", () => {
    assert.deepEqual(bodyToWire("héllo"), { body: "héllo" });
    const bytes = new Uint8Array([9, 0xff, 0, 1]).subarray(1, 3);
    assert.deepEqual(bodyToWire(bytes), { body: "/wA=", encoding: "base64" });
  });

  it("a push leaves out what it is not given", () => {
    assert.deepEqual(JSON.parse(JSON.stringify(pushToWire("x", { delayMs: 5 }))), { body: "x", delay_ms: 5 });
  });

  it("a reserve answer names its unreachable topics (issue 37); an older server's, none", () => {
    const answer = { jobs: [], settled: [], wait_ms: 0, unreachable: ["a", "b"] };
    assert.deepEqual(reservedFrom(answer).unreachable, ["a", "b"]);
    const older = { jobs: [], settled: [], wait_ms: 0 } as unknown as typeof answer;
    assert.deepEqual(reservedFrom(older).unreachable, []);
  });

  it("a settlement names its lease by receipt when it has one, else by topic, id and token", () => {
    const byToken = { topic: "t", id: "i", token: 7 };
    assert.deepEqual(settlementToWire({ lease: byToken, outcome: "ack" }), byToken);
    const byReceipt = { ...byToken, receipt: "r" };
    assert.deepEqual(JSON.parse(JSON.stringify(settlementToWire({ lease: byReceipt, outcome: "nack", delayMs: 3 }))), {
      receipt: "r",
      outcome: "nack",
      delay_ms: 3,
    });
    assert.deepEqual(leaseBody(byReceipt), { token: 7 });
    assert.deepEqual(leaseBody({ topic: "t", id: "i", receipt: "r" }), { receipt: "r" });
    assert.throws(() => leaseBody({ topic: "t", id: "i" }), TypeError);
  });
});

describe("client settings", () => {
  it("default to $DELAYQ_SERVER and $DELAYQ_TOKEN, else the local server", () => {
    const saved = { server: process.env["DELAYQ_SERVER"], token: process.env["DELAYQ_TOKEN"] };
    try {
      delete process.env["DELAYQ_SERVER"];
      delete process.env["DELAYQ_TOKEN"];
      const local = new Client();
      assert.equal(local.url, "http://127.0.0.1:7070");
      assert.equal(local.http.timeoutMs, DEFAULT_TIMEOUT_MS);
      process.env["DELAYQ_SERVER"] = "https://queue.example:8443/base/";
      assert.equal(new Client().url, "https://queue.example:8443/base");
      assert.equal(new Client({ url: "http://h:1" }).url, "http://h:1");
      assert.throws(() => new Client({ timeoutMs: 0 }), RangeError);
    } finally {
      for (const [name, value] of [["DELAYQ_SERVER", saved.server], ["DELAYQ_TOKEN", saved.token]] as const) {
        if (value === undefined) {
          delete process.env[name];
        } else {
          process.env[name] = value;
        }
      }
    }
  });
});
