/**
 * The producer of the order-cancel example: when order 42 is placed, it schedules "cancel
 * order 42" for 30 minutes later. If the order is paid before then, the shop deletes the
 * job (`client.delete("orders.cancel", "order-42")`) and nothing happens.
 *
 * `DELAYQ_SERVER` names the server (default http://127.0.0.1:7070); `ORDER_CANCEL_DELAY_MS`
 * shortens the 30 minutes (the test uses it).
 *
 * @module
 */

import { Client } from "delayq";

const client = new Client();
const delayMs = Number(process.env["ORDER_CANCEL_DELAY_MS"] ?? 30 * 60_000);

const pushed = await client.push("orders.cancel", JSON.stringify({ order: 42 }), {
  // The id makes the push idempotent: placing the same order twice schedules one job.
  id: "order-42",
  delayMs,
  // A cancellation that fails (the shop's API is down) is retried 5 times, from 10 s on.
  maxAttempts: 5,
  backoff: { kind: "exponential", baseMs: 10_000, maxMs: 600_000 },
});
console.log(`scheduled: cancel order 42 at ${pushed.readyAt.toISOString()} (${pushed.created ? "new" : "already there"})`);
