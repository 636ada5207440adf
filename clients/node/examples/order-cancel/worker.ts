/**
 * The worker of the order-cancel example: cancels each order whose cancel job falls due,
 * unless it was paid meanwhile. It runs until SIGINT or SIGTERM, then finishes the jobs it
 * is running and gives back the others.
 *
 * `DELAYQ_SERVER` names the server (default http://127.0.0.1:7070).
 *
 * @module
 */

import { PermanentError, Worker, consoleLogger, type Job, type JobContext } from "delayq";

/** The shop's orders (here, a stand-in): which are paid, and cancelling one. */
const shop = {
  paid: new Set<number>([7]),
  async cancel(order: number, signal: AbortSignal): Promise<void> {
    // A real shop calls its order service here, passing `signal` along.
    signal.throwIfAborted();
    console.log(`cancelled order ${order}`);
  },
};

async function cancelUnpaid(job: Job, { signal }: JobContext): Promise<void> {
  const { order } = job.json<{ order: unknown }>();
  if (typeof order !== "number") {
    // Retrying will not help: bury it, with the reason, among the dead jobs.
    throw new PermanentError(`no order number in ${job.text()}`);
  }
  if (shop.paid.has(order)) {
    console.log(`order ${order} was paid: nothing to cancel`);
    return;
  }
  // An exception here (the order service is down) retries the job with its back-off.
  await shop.cancel(order, signal);
}

const worker = new Worker(["orders.cancel"], cancelUnpaid, { concurrency: 10, logger: consoleLogger("info") });
console.log("worker started");
const report = await worker.run();
console.log(`worker stopped: ${JSON.stringify(report)}`);
