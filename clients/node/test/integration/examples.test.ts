/**
 * The order-cancel example of the README, run as a user runs it, against a real server on
 * each engine: the producer schedules the cancellation (its 30 minutes shortened through
 * `ORDER_CANCEL_DELAY_MS`), the worker cancels the order when it is due, and stops cleanly
 * on SIGTERM.
 *
 * @module
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Client, NotFoundError } from "../../src/index.js";
import { DelayqServer, ENGINES, NodeChild, waitUntil } from "../harness.js";

for (const engine of ENGINES) {
  describe(`examples (${engine})`, () => {
    let server: DelayqServer;

    before(async () => {
      server = await DelayqServer.start({ engine });
    });

    after(async () => {
      await server.stop();
    });

    it("order-cancel: the producer schedules it, the worker cancels the order when due", { timeout: 30_000 }, async () => {
      const env = { DELAYQ_SERVER: server.url, ORDER_CANCEL_DELAY_MS: "1000" };
      const producer = NodeChild.start("examples/order-cancel/producer.js", [], env);
      const worker = NodeChild.start("examples/order-cancel/worker.js", [], env);
      try {
        await producer.waitFor(/scheduled: cancel order 42 at \S+ \(new\)/, 15_000);
        assert.ok(await producer.waitExit(5_000));
        assert.equal(producer.exitCode, 0, producer.output());
        await worker.waitFor(/cancelled order 42/, 15_000);
        const client = new Client({ url: server.url });
        const gone = async (): Promise<boolean> =>
          client.get("orders.cancel", "order-42").then(
            () => false,
            (e: unknown) => e instanceof NotFoundError,
          );
        await waitUntil(gone, 5_000, "the job acked");
        worker.signal("SIGTERM");
        assert.ok(await worker.waitExit(10_000), "the worker stops on SIGTERM");
        assert.equal(worker.exitCode, 0, worker.output());
        assert.match(worker.output(), /worker stopped: \{"acked":1,/);
      } finally {
        await producer.stop();
        await worker.stop();
      }
    });
  });
}
