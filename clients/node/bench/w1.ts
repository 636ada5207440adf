/**
 * W1 for the Node client: push JOBS no-op jobs with 100-byte bodies due now to TOPIC, then
 * drain them with one {@link Worker} of concurrency CONCURRENCY, and print one JSON line
 * when the topic is drained: `{"jobs": N, "seconds": S, "jobs_per_s": R}` (the drain only:
 * from the worker's start to the last ack answered).
 *
 *     node dist/bench/w1.js URL TOPIC JOBS CONCURRENCY
 *
 * The topic should be empty before (it is left empty after).
 *
 * @module
 */

import { Client, Worker, consoleLogger, type NewJob } from "../src/index.js";

const [url, topic, jobsArg, concurrencyArg] = process.argv.slice(2);
const jobs = Number(jobsArg);
const concurrency = Number(concurrencyArg);
if (url === undefined || topic === undefined || !(jobs > 0) || !(concurrency > 0)) {
  console.error("usage: node dist/bench/w1.js URL TOPIC JOBS CONCURRENCY");
  process.exit(2);
}

const client = new Client({ url });
const body = "x".repeat(100);
for (let pushed = 0; pushed < jobs; ) {
  const n = Math.min(1_000, jobs - pushed);
  const batch: NewJob[] = Array.from({ length: n }, () => ({ body }));
  await client.pushBatch(topic, batch);
  pushed += n;
}

const worker = new Worker([topic], () => undefined, { client, concurrency, logger: consoleLogger("error") });
const started = performance.now();
const running = worker.start();
await new Promise<void>((drained) => {
  const check = (): void => {
    if (worker.report().acked >= jobs) {
      drained();
    } else {
      setTimeout(check, 1);
    }
  };
  check();
});
const seconds = (performance.now() - started) / 1_000;
await worker.close();
await running;
const left = await client.stats(topic);
if (left.ready + left.reserved + left.delayed > 0) {
  console.error(`the topic is not drained: ${JSON.stringify(left)}`);
  process.exit(1);
}
console.log(JSON.stringify({ jobs, seconds: Number(seconds.toFixed(3)), jobs_per_s: Math.round(jobs / seconds) }));
