// The BullMQ side of delayq's side-by-side benchmarks (crates/bench, systems/bullmq.rs).
//
// Usage: node bench/bullmq.mjs <redis port>
// Reads one JSON command per line on stdin, answers one JSON line on stdout:
//   {"op":"ping"}
//   {"op":"fill","n":N,"delays":{"fixed_ms":D}|{"spread_ms":S},"body":B}
//   {"op":"drain","n":N,"concurrency":C,"cap_ms":T}  -> {"jobs":..,"elapsed_ms":..}
//   {"op":"delayed","jobs":N,"spread_ms":S,"concurrency":C,"batch":K,"body":B,"cap_ms":T}
//        -> {"pushed":..,"push_ms":..,"delivered":..,"elapsed_ms":..,"late_us":[..]}
//   {"op":"idle","workers":W}  (starts W idle Workers)   {"op":"stop_idle"}
// Every job is removed on completion (removeOnComplete). Lateness is measured on the host
// clock: the producer stamps each body with floor(now ms) + delay, the processor subtracts
// it from its own now.
import { Queue, Worker } from 'bullmq';

import { body, draw, nowMs, serve, sleep } from './peer.mjs';

const port = Number(process.argv[2]);
const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
const NAME = 'bench';
const queue = new Queue(NAME, {
  connection,
  defaultJobOptions: { removeOnComplete: true, removeOnFail: true },
});
function jobs(n, delays, size) {
  const now = Math.floor(nowMs());
  const out = [];
  for (let i = 0; i < n; i++) {
    const d = draw(delays);
    out.push({ name: 'j', data: { b: body(now + d, size) }, opts: d > 0 ? { delay: d } : {} });
  }
  return out;
}

function worker(processor, concurrency) {
  return new Worker(NAME, processor, {
    connection,
    concurrency,
    removeOnComplete: { count: 0 },
    removeOnFail: { count: 0 },
  });
}

async function fill({ n, delays, body: size }) {
  let next = 0;
  const task = async () => {
    while (next < n) {
      const k = Math.min(1000, n - next);
      next += k;
      await queue.addBulk(jobs(k, delays, size));
    }
  };
  await Promise.all([task(), task(), task(), task()]);
  return {};
}

async function drain({ n, concurrency, cap_ms }) {
  let done = 0;
  let finish;
  const finished = new Promise((r) => (finish = r));
  const start = nowMs();
  const w = worker(async () => {
    done += 1;
    if (done === n) finish();
  }, concurrency);
  await Promise.race([finished, sleep(cap_ms)]);
  const elapsed_ms = nowMs() - start;
  const jobs = Math.min(done, n);
  await w.close();
  return { jobs, elapsed_ms };
}

async function delayed({ jobs: n, spread_ms, concurrency, batch, body: size, cap_ms }) {
  const late = new Float64Array(n);
  let delivered = 0;
  let last = 0;
  let finish;
  const finished = new Promise((r) => (finish = r));
  const w = worker(async (job) => {
    const at = nowMs();
    const due = Number(job.data.b.slice(0, job.data.b.indexOf(':')));
    if (delivered < n) late[delivered] = Math.round((at - due) * 1000);
    delivered += 1;
    last = at;
    if (delivered === n) finish();
  }, concurrency);
  await w.waitUntilReady();
  await sleep(200);
  const start = nowMs();
  let pushed = 0;
  while (pushed < n && nowMs() - start < cap_ms) {
    const k = Math.min(batch, n - pushed);
    await queue.addBulk(jobs(k, { spread_ms }, size));
    pushed += k;
  }
  const push_ms = nowMs() - start;
  await Promise.race([finished, sleep(Math.max(0, cap_ms - (nowMs() - start)))]);
  await w.close();
  const count = Math.min(delivered, n);
  return {
    pushed,
    push_ms,
    delivered: count,
    elapsed_ms: last > 0 ? last - start : 0,
    late_us: Array.from(late.subarray(0, count)),
  };
}

let idlers = [];
async function idle({ workers }) {
  idlers = [];
  for (let i = 0; i < workers; i++) idlers.push(worker(async () => {}, 1));
  await Promise.all(idlers.map((w) => w.waitUntilReady()));
  return {};
}

async function stopIdle() {
  await Promise.all(idlers.map((w) => w.close()));
  idlers = [];
  return {};
}

const ops = {
  ping: async () => ({}),
  fill,
  drain,
  delayed,
  idle,
  stop_idle: stopIdle,
};

serve(ops, async () => {
  await stopIdle();
  await queue.close();
});
