// The pg-boss side of delayq's side-by-side benchmarks (crates/bench, systems/pgboss.rs).
//
// Usage: node bench/pgboss.mjs <postgres URL>
// Reads one JSON command per line on stdin, answers one JSON line on stdout (the protocol of
// bench/bullmq.mjs):
//   {"op":"ping"}
//   {"op":"fill","n":N,"delays":{"fixed_ms":D}|{"spread_ms":S},"body":B}
//   {"op":"drain","n":N,"concurrency":C,"cap_ms":T}  -> {"jobs":..,"elapsed_ms":..}
//   {"op":"delayed","jobs":N,"spread_ms":S,"concurrency":C,"batch":K,"body":B,"cap_ms":T}
//        -> {"pushed":..,"push_ms":..,"delivered":..,"elapsed_ms":..,"late_us":[..]}
//   {"op":"idle","workers":W}  (starts W idle work() workers)   {"op":"stop_idle"}
// Jobs go in with insert() (batches; startAfter per job, an ISO time, so delays keep their
// milliseconds). Consumers are fetch() + complete() loops, one job at a time, or, for the
// idle workers, work(): see `consumer` for why. pg-boss keeps completed jobs in its table
// until its own maintenance archives them, as it does by default. Lateness is measured on
// the host clock: the producer stamps each body with floor(now ms) + delay, the consumer
// subtracts it from its own now.
import PgBoss from 'pg-boss';

import { body, draw, nowMs, serve, sleep } from './peer.mjs';

const url = process.argv[2];
const NAME = 'bench';
// pg-boss polls: 0.5 s is the least pollingIntervalSeconds it accepts (its
// MIN_POLLING_INTERVAL_MS, documented as "must be at least every 500ms"), so every consumer
// here waits that long after finding nothing, the shortest pg-boss allows.
const POLL_S = 0.5;
// Pool connections: one per consumer loop of W1's largest C (50), plus the producer and
// pg-boss's own maintenance, so that no consumer waits for a connection.
const POOL = 60;

const boss = new PgBoss({ connectionString: url, max: POOL, pollingIntervalSeconds: POLL_S });
// An 'error' event without a listener would end the process; log it instead (stderr goes to
// the suite's log file), and let the operation that failed answer its own error.
boss.on('error', (e) => console.error('pg-boss error:', e));
await boss.start();
await boss.createQueue(NAME);

function jobs(n, delays, size) {
  const now = Math.floor(nowMs());
  const out = [];
  for (let i = 0; i < n; i++) {
    const d = draw(delays);
    const job = { name: NAME, data: { b: body(now + d, size) } };
    if (d > 0) job.startAfter = new Date(now + d).toISOString();
    out.push(job);
  }
  return out;
}

// One consumer: fetch one job, complete it, and fetch again at once; after a fetch that
// found nothing, wait the polling interval, as work() does. pg-boss's work() waits out the
// polling interval after every batch, even a full one (src/worker.js), so C work() workers
// with a batch of 1 could not take more than C / 0.5 s jobs per second; this loop over the
// same documented calls is the fastest consumer pg-boss's API allows.
async function consumer(running, handle) {
  while (running()) {
    const got = await boss.fetch(NAME);
    if (!got || got.length === 0) {
      await sleep(POLL_S * 1000);
      continue;
    }
    const at = nowMs();
    await boss.complete(NAME, got.map((j) => j.id));
    for (const j of got) handle(j, at);
  }
}

async function fill({ n, delays, body: size }) {
  let next = 0;
  const task = async () => {
    while (next < n) {
      const k = Math.min(1000, n - next);
      next += k;
      await boss.insert(jobs(k, delays, size));
    }
  };
  await Promise.all([task(), task(), task(), task()]);
  return {};
}

async function drain({ n, concurrency, cap_ms }) {
  let done = 0;
  let stop = false;
  let finish;
  const finished = new Promise((r) => (finish = r));
  const start = nowMs();
  const running = () => !stop && done < n;
  const loops = [];
  for (let i = 0; i < concurrency; i++) {
    loops.push(
      consumer(running, () => {
        done += 1;
        if (done === n) finish();
      }),
    );
  }
  await Promise.race([finished, sleep(cap_ms)]);
  const elapsed_ms = nowMs() - start;
  const count = Math.min(done, n);
  stop = true;
  await Promise.all(loops);
  return { jobs: count, elapsed_ms };
}

async function delayed({ jobs: n, spread_ms, concurrency, batch, body: size, cap_ms }) {
  const late = new Float64Array(n);
  let delivered = 0;
  let last = 0;
  let stop = false;
  let finish;
  const finished = new Promise((r) => (finish = r));
  const running = () => !stop && delivered < n;
  const loops = [];
  for (let i = 0; i < concurrency; i++) {
    loops.push(
      consumer(running, (job, at) => {
        const due = Number(job.data.b.slice(0, job.data.b.indexOf(':')));
        if (delivered < n) late[delivered] = Math.round((at - due) * 1000);
        delivered += 1;
        last = at;
        if (delivered === n) finish();
      }),
    );
  }
  await sleep(200);
  const start = nowMs();
  let pushed = 0;
  while (pushed < n && nowMs() - start < cap_ms) {
    const k = Math.min(batch, n - pushed);
    await boss.insert(jobs(k, { spread_ms }, size));
    pushed += k;
  }
  const push_ms = nowMs() - start;
  await Promise.race([finished, sleep(Math.max(0, cap_ms - (nowMs() - start)))]);
  stop = true;
  await Promise.all(loops);
  const count = Math.min(delivered, n);
  return {
    pushed,
    push_ms,
    delivered: count,
    elapsed_ms: last > 0 ? last - start : 0,
    late_us: Array.from(late.subarray(0, count)),
  };
}

// Idle workers are pg-boss's own work(): each polls the queue every POLL_S.
let idlers = [];
async function idle({ workers }) {
  idlers = [];
  for (let i = 0; i < workers; i++) {
    idlers.push(await boss.work(NAME, { pollingIntervalSeconds: POLL_S }, async () => {}));
  }
  return {};
}

async function stopIdle() {
  await Promise.all(idlers.map((id) => boss.offWork({ id })));
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
  await boss.stop({ graceful: false, wait: false });
});
