/**
 * The W1 benchmark script runs and prints its one JSON line (a small load: the figures
 * themselves come from the benchmark suite).
 *
 * @module
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { DelayqServer, NodeChild, topicName } from "../harness.js";

describe("bench/w1", () => {
  let server: DelayqServer;

  before(async () => {
    server = await DelayqServer.start();
  });

  after(async () => {
    await server.stop();
  });

  it("drains the jobs it pushed and prints {jobs, seconds, jobs_per_s}", { timeout: 60_000 }, async () => {
    const child = NodeChild.start("bench/w1.js", [server.url, topicName("w1"), "500", "10"]);
    try {
      const line = (await child.waitFor(/^\{.*\}$/m, 50_000))[0];
      const r = JSON.parse(line) as { jobs: number; seconds: number; jobs_per_s: number };
      assert.equal(r.jobs, 500);
      assert.ok(r.seconds > 0 && r.jobs_per_s > 0, line);
      assert.ok(await child.waitExit(10_000));
      assert.equal(child.exitCode, 0, child.output());
    } finally {
      await child.stop();
    }
  });
});
