/**
 * An npm beanstalkd client, jackd, unchanged against delayq's beanstalkd protocol
 * (`delayq serve --beanstalk`), on each engine: put, reserve and delete; a delay kept on
 * time; priorities; release with a delay; bury, peek, kick and kick-job; use, watch and
 * ignore across tubes; a worker that disconnects holding a job; JOB_TOO_BIG; and jobs put
 * over beanstalkd as the HTTP API sees them (the tube `default` is the topic `default`).
 *
 * jackd keeps job ids as the decimal strings the server sends (delayq's stay below 2^53
 * anyway), answers `stats*` and `list-*` with their YAML text, and rejects a command with an
 * `Error` whose message is the server's reply line (`NOT_FOUND`, `TIMED_OUT`, ...).
 *
 * @module
 */

import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";

import jackd from "jackd";
import type { JackdClient } from "jackd";

import { Client, NotFoundError } from "../../src/index.js";
import { DelayqServer, ENGINES, sleep, topicName } from "../harness.js";

/**
 * jackd is CommonJS and its `module.exports` is the client class itself, which is what a
 * default import gives in Node; its typings name the class `JackdClient`.
 */
const Jackd = jackd as unknown as typeof JackdClient;

/** The log line `delayq serve` writes once it listens for beanstalkd clients. */
const BEANSTALK_AT = /beanstalkd protocol on 127\.0\.0\.1:(\d+)/;

/** `key: value` lines of a beanstalkd YAML dictionary. */
function yamlDict(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const m = /^([\w-]+): (.*)$/.exec(line);
    if (m !== null) {
      out[m[1] as string] = m[2] as string;
    }
  }
  return out;
}

/** `- item` lines of a beanstalkd YAML list. */
function yamlList(text: string): string[] {
  return text
    .split("\n")
    .filter((line) => line.startsWith("- "))
    .map((line) => line.slice(2));
}

/** Rejects with jackd's error for the server's reply `reply`. */
async function rejectsWith(call: Promise<unknown>, reply: string): Promise<void> {
  await assert.rejects(call, (e: unknown) => {
    assert.ok(e instanceof Error);
    assert.equal(e.message, reply);
    return true;
  });
}

/** Runs `f`, failing unless it takes between `low` and `high` ms. */
async function within<T>(low: number, high: number, what: string, f: () => Promise<T>): Promise<T> {
  const start = performance.now();
  const out = await f();
  const took = performance.now() - start;
  assert.ok(took >= low && took <= high, `${what}: took ${took.toFixed(0)} ms, expected ${low} to ${high} ms`);
  return out;
}

for (const engine of ENGINES) {
  describe(`beanstalkd protocol with jackd (${engine})`, () => {
    let server: DelayqServer;
    let port: number;
    let http: Client;
    let opened: JackdClient[] = [];

    before(async () => {
      server = await DelayqServer.start({ engine, args: ["--beanstalk", "127.0.0.1:0"] });
      const m = BEANSTALK_AT.exec(server.log());
      assert.ok(m !== null, `delayq serve did not say where it speaks beanstalkd:\n${server.log()}`);
      port = Number(m[1]);
      http = new Client({ url: server.url });
    });

    afterEach(() => {
      for (const c of opened) {
        c.socket.destroy();
      }
      opened = [];
    });

    after(async () => {
      await server.stop();
    });

    /** A connected jackd client, closed after the test; `use`s and `watch`es `tube` if given. */
    async function connect(tube?: string): Promise<JackdClient> {
      const c = new Jackd();
      opened.push(c);
      await c.connect({ host: "127.0.0.1", port });
      if (tube !== undefined) {
        assert.equal(await c.use(tube), tube);
        assert.equal(await c.watch(tube), 2);
        assert.equal(await c.ignore("default"), 1);
      }
      return c;
    }

    /** The body of a job as text. */
    function text(payload: Buffer | string): string {
      return payload.toString();
    }

    it("put, reserve and delete", async () => {
      const tube = topicName("put");
      const c = await connect(tube);
      const id = await c.put("hello from jackd", { ttr: 30 });
      assert.match(id, /^\d+$/);
      assert.ok(Number(id) > 0 && Number.isSafeInteger(Number(id)));
      const job = await c.reserveWithTimeout(5);
      assert.deepEqual([job.id, text(job.payload)], [id, "hello from jackd"]);
      const stats = yamlDict(await c.statsJob(id));
      assert.deepEqual([stats["id"], stats["tube"], stats["state"], stats["ttr"]], [id, tube, "reserved", "30"]);
      await c.delete(id);
      await rejectsWith(c.peek(id), "NOT_FOUND");
      await rejectsWith(c.delete(id), "NOT_FOUND");
      await within(0, 2_000, "reserve-with-timeout 0", () => rejectsWith(c.reserveWithTimeout(0), "TIMED_OUT"));
    });

    it("bodies come back byte for byte (UTF-8, CRLF and a NUL inside)", async () => {
      const c = await connect(topicName("bytes"));
      // jackd 2.2.2 sends a string as its UTF-8 bytes, but JSON-encodes a Buffer (it checks
      // `typeof payload === "object"` first), so bytes go as a string here.
      const body = "Grüße, 日本 \u0000\r\nput 1 2 3 4\r\n";
      const id = await c.put(body);
      const job = await c.reserveWithTimeout(5);
      assert.equal(job.id, id);
      assert.ok(Buffer.isBuffer(job.payload) && job.payload.equals(Buffer.from(body, "utf8")));
      const buffer = Buffer.from([0, 1, 2, 0xff]);
      const asJson = await c.put(buffer);
      assert.equal(text((await c.reserveWithTimeout(5)).payload), JSON.stringify(buffer));
      await c.delete(id);
      await c.delete(asJson);
    });

    it("a delayed job is reserved when due, not before", async () => {
      const c = await connect(topicName("delay"));
      const start = performance.now();
      const id = await c.put("in a second", { delay: 1 });
      assert.equal((await c.peekDelayed()).id, id);
      const stats = yamlDict(await c.statsJob(id));
      assert.deepEqual([stats["state"], stats["delay"]], ["delayed", "1"]);
      await rejectsWith(c.peekReady(), "NOT_FOUND");
      await rejectsWith(c.reserveWithTimeout(0), "TIMED_OUT");
      const job = await c.reserveWithTimeout(5);
      const took = performance.now() - start;
      assert.equal(job.id, id);
      assert.ok(took >= 900 && took <= 2_500, `a 1 s delay was reserved after ${took.toFixed(0)} ms`);
      await c.delete(id);
    });

    it("lower priorities first, equal ones in put order", async () => {
      const c = await connect(topicName("priority"));
      const puts: [string, number][] = [
        ["low", 2 ** 32 - 1],
        ["mid", 1024],
        ["urgent", 0],
        ["mid-later", 1024],
        ["high", 5],
      ];
      for (const [body, priority] of puts) {
        await c.put(body, { priority });
      }
      const order: string[] = [];
      for (let i = 0; i < puts.length; i++) {
        const job = await c.reserveWithTimeout(5);
        order.push(text(job.payload));
        await c.delete(job.id);
      }
      assert.deepEqual(order, ["urgent", "high", "mid", "mid-later", "low"]);
    });

    it("release with a delay, then at once to another worker", async () => {
      const tube = topicName("release");
      const c = await connect(tube);
      const id = await c.put("again later", { priority: 100 });
      await c.reserveWithTimeout(5);
      // Timed from before the release, which starts the 1 s: the checks between it and the
      // reserve take a varying part of that second (under load, most of it).
      const again = await within(990, 3_000, "a job released with a 1 s delay", async () => {
        await c.release(id, { priority: 7, delay: 1 });
        const stats = yamlDict(await c.statsJob(id));
        assert.deepEqual([stats["state"], stats["pri"]], ["delayed", "7"]);
        await rejectsWith(c.reserveWithTimeout(0), "TIMED_OUT");
        return c.reserveWithTimeout(5);
      });
      assert.equal(again.id, id);
      await c.release(id);
      const other = await connect(tube);
      const taken = await within(0, 1_000, "a job released without delay", () => other.reserveWithTimeout(2));
      assert.equal(taken.id, id);
      await rejectsWith(c.release(id), "NOT_FOUND"); // only its holder may release it
      await other.delete(id);
    });

    it("bury, peek-buried, kick and kick-job", async () => {
      const tube = topicName("bury");
      const c = await connect(tube);
      const ids: string[] = [];
      for (const body of ["first", "second", "third"]) {
        ids.push(await c.put(body));
      }
      const [first, second, third] = ids as [string, string, string];
      for (let i = 0; i < 3; i++) {
        const job = await c.reserveWithTimeout(5);
        await c.bury(job.id, 9);
      }
      await rejectsWith(c.peekReady(), "NOT_FOUND");
      assert.equal((await c.peekBuried()).id, first);
      const stats = yamlDict(await c.statsJob(first));
      assert.deepEqual([stats["state"], stats["pri"]], ["buried", "9"]);
      assert.equal(yamlDict(await c.statsTube(tube))["current-jobs-buried"], "3");
      await rejectsWith(c.reserveWithTimeout(0), "TIMED_OUT");
      assert.equal(await c.kick(1), 1);
      assert.equal(yamlDict(await c.statsJob(first))["state"], "ready");
      assert.equal((await c.peekBuried()).id, second);
      await c.kickJob(third);
      assert.equal(yamlDict(await c.statsJob(third))["state"], "ready");
      assert.equal(await c.kick(10), 1);
      await rejectsWith(c.peekBuried(), "NOT_FOUND");
      await rejectsWith(c.kickJob(first), "NOT_FOUND"); // ready: nothing to kick
      // With nothing buried, kick moves delayed jobs.
      const delayed = await c.put("much later", { delay: 3_600 });
      assert.equal((await c.peekDelayed()).id, delayed);
      assert.equal(await c.kick(5), 1);
      assert.equal(yamlDict(await c.statsJob(delayed))["state"], "ready");
      const got = new Set<string>();
      for (let i = 0; i < 4; i++) {
        const job = await c.reserveWithTimeout(5);
        got.add(job.id);
        await c.delete(job.id);
      }
      assert.deepEqual([...got].sort(), [first, second, third, delayed].sort());
    });

    it("touch keeps a job past its ttr", async () => {
      const tube = topicName("touch");
      const c = await connect(tube);
      const other = await connect(tube);
      const id = await c.put("slow work", { ttr: 2 });
      await c.reserveWithTimeout(5);
      for (let i = 0; i < 3; i++) {
        await sleep(1_000);
        await c.touch(id);
        const stats = yamlDict(await c.statsJob(id));
        assert.equal(stats["state"], "reserved");
      }
      await rejectsWith(other.reserveWithTimeout(0), "TIMED_OUT");
      await rejectsWith(other.touch(id), "NOT_FOUND");
      await c.delete(id);
    });

    it("use, watch and ignore across tubes", async () => {
      const base = topicName("tubes");
      const [a, b, third] = [`${base}.a`, `${base}.b`, `${base}.c`];
      const producer = await connect();
      assert.equal(await producer.listTubeUsed(), "default");
      await producer.use(a);
      const inA = await producer.put("for a");
      await producer.use(b);
      const inB = await producer.put("for b");
      assert.equal(await producer.getCurrentTube(), b);
      const tubes = yamlList(await producer.listTubes(""));
      assert.ok(tubes.includes(a) && tubes.includes(b), tubes.join(", "));

      const worker = await connect();
      assert.equal(await worker.watch(b), 2);
      assert.equal(await worker.ignore("default"), 1);
      assert.deepEqual(yamlList(await worker.listTubesWatched("")), [b]);
      const job = await worker.reserveWithTimeout(5);
      assert.deepEqual([job.id, text(job.payload)], [inB, "for b"]);
      await worker.delete(job.id);
      await rejectsWith(worker.reserveWithTimeout(0), "TIMED_OUT"); // a is not watched
      await rejectsWith(worker.ignore(b), "NOT_IGNORED"); // the last watched tube
      assert.equal(await worker.watch(a), 2);
      assert.equal(await worker.watch(a), 2); // watching twice counts once
      assert.equal(await worker.ignore(b), 1);
      const fromA = await worker.reserveWithTimeout(5);
      assert.deepEqual([fromA.id, text(fromA.payload)], [inA, "for a"]);
      await worker.delete(fromA.id);

      // A reserve waiting on two tubes takes what comes into either.
      await worker.watch(third);
      const waiting = worker.reserveWithTimeout(5);
      await sleep(300);
      await producer.use(third);
      const inC = await producer.put("for c");
      const got = await within(0, 2_000, "a waiting reserve", () => waiting);
      assert.deepEqual([got.id, text(got.payload)], [inC, "for c"]);
      await worker.delete(got.id);
    });

    it("a worker that disconnects holding a job gives it back at once", async () => {
      const tube = topicName("disconnect");
      const producer = await connect(tube);
      const id = await producer.put("held", { ttr: 600 });
      const holder = await connect(tube);
      assert.equal((await holder.reserveWithTimeout(5)).id, id);
      const waiting = await connect(tube);
      const pending = waiting.reserveWithTimeout(10);
      await sleep(300);
      holder.socket.destroy(); // no release, no quit: the connection just goes
      const got = await within(0, 1_500, "a job whose holder went away (ttr 600 s)", () => pending);
      assert.equal(got.id, id);
      assert.equal(yamlDict(await producer.statsJob(id))["state"], "reserved");
      await waiting.delete(id);
    });

    it("JOB_TOO_BIG, and the connection goes on", async () => {
      const c = await connect(topicName("big"));
      await rejectsWith(c.put("x".repeat(65_536)), "JOB_TOO_BIG");
      const id = await c.put("y".repeat(65_535)); // max-job-size itself fits
      const job = await c.reserveWithTimeout(5);
      assert.equal(job.id, id);
      assert.equal(job.payload.length, 65_535);
      await c.delete(id);
    });

    it("the HTTP API sees jobs put over beanstalkd, and beanstalkd reserves jobs pushed over HTTP", async () => {
      const c = await connect(); // uses and watches the tube "default": the topic "default"
      const before = await http.stats("default");
      const id = await c.put("via beanstalk", { priority: 7, ttr: 30 });
      let job = await http.get("default", id);
      assert.deepEqual([job.topic, job.id, job.text(), job.state], ["default", id, "via beanstalk", "ready"]);
      assert.deepEqual([job.priority, job.ttrMs], [7, 30_000]);
      assert.equal((await http.stats("default")).ready, before.ready + 1);
      assert.equal((await c.reserveWithTimeout(5)).id, id);
      assert.equal((await http.get("default", id)).state, "reserved");
      await c.delete(id);
      await assert.rejects(http.get("default", id), NotFoundError);
      assert.equal((await http.stats("default")).ready, before.ready);

      // Another tube is the topic of the same name.
      const tube = topicName("http");
      await c.use(tube);
      const later = await c.put("later", { delay: 3_600 });
      job = await http.get(tube, later);
      assert.equal(job.state, "delayed");
      const delayS = (job.readyAt.getTime() - job.createdAt.getTime()) / 1_000;
      assert.ok(delayS >= 3_599 && delayS <= 3_601, String(delayS));
      assert.equal((await http.stats(tube)).delayed, 1);
      // Buried over beanstalkd is dead for the HTTP API.
      await c.kickJob(later);
      await c.watch(tube);
      await c.ignore("default");
      await c.bury((await c.reserveWithTimeout(5)).id, 0);
      assert.equal((await http.get(tube, later)).state, "dead");
      assert.equal((await http.stats(tube)).dead, 1);

      // A job pushed over HTTP is reserved over beanstalkd, under a number of its own.
      await http.push(tube, "via http", { id: "pushed-over-http" });
      const pushed = await c.reserveWithTimeout(5);
      assert.equal(text(pushed.payload), "via http");
      assert.match(pushed.id, /^\d+$/);
      assert.equal(yamlDict(await c.statsJob(pushed.id))["tube"], tube);
      await c.delete(pushed.id);
      await assert.rejects(http.get(tube, "pushed-over-http"), NotFoundError);
    });
  });
}
