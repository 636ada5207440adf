// What the Node peers of delayq's side-by-side benchmarks share (bench/bullmq.mjs,
// bench/pgboss.mjs): the clock, the bodies that carry their due time, the delays drawn, and
// the loop that answers the suite's JSON commands (one per line on stdin, one JSON line
// back on stdout; see the peers' headers for the commands).
import { createInterface } from 'node:readline';

/** Now on the host clock, in milliseconds (fractional). */
export const nowMs = () => performance.timeOrigin + performance.now();

/** Resolves after `ms` milliseconds. */
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A body of `size` bytes that starts with the job's due time: `<due ms>:xxx…`. */
export function body(due, size) {
  const s = `${due}:`;
  return s.length >= size ? s : s + 'x'.repeat(size - s.length);
}

/** A delay in ms: `fixed_ms`, or uniform in [0, `spread_ms`]. */
export function draw(delays) {
  if (delays.spread_ms !== undefined) return Math.floor(Math.random() * (delays.spread_ms + 1));
  return delays.fixed_ms ?? 0;
}

/**
 * Answers the suite's commands with `ops` (op name -> async function of the command), one at
 * a time in order; `close` runs when stdin ends, before the process exits.
 */
export function serve(ops, close) {
  const rl = createInterface({ input: process.stdin });
  let chain = Promise.resolve();
  rl.on('line', (line) => {
    chain = chain.then(async () => {
      let reply;
      try {
        const cmd = JSON.parse(line);
        const op = ops[cmd.op];
        if (!op) throw new Error(`unknown op ${cmd.op}`);
        reply = { ok: true, ...(await op(cmd)) };
      } catch (e) {
        reply = { ok: false, error: String(e && e.stack ? e.stack : e) };
      }
      process.stdout.write(JSON.stringify(reply) + '\n');
    });
  });
  rl.on('close', () => {
    chain.then(async () => {
      await close();
      process.exit(0);
    });
  });
}
