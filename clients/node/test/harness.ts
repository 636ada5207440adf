/**
 * The test harness: starts a real `delayq serve` (embedded engine, or Redis on a
 * `redis-server` of its own) on a free loopback port with a temporary data directory, waits
 * until it answers, and kills only the processes it started, by PID.
 *
 * - The server binary is `$DELAYQ_BIN`, else `<repo>/target/debug/delayq` (the repository
 *   is two directories above this client). Redis is `$DELAYQ_REDIS_SERVER`, else
 *   `redis-server` on the PATH. A missing binary fails with what to install; nothing is
 *   skipped.
 * - A port taken between choosing it and binding it is retried on another one.
 * - Every wait is bounded, and a server that does not come up fails with its log.
 *
 * @module
 */

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { request as httpGet } from "node:http";
import { request as httpsGet } from "node:https";
import { createConnection, createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The two engines of the server. */
export type Engine = "embedded" | "redis";

/** Both engines, for suites that run once per engine. */
export const ENGINES: readonly Engine[] = ["embedded", "redis"];

/** This client's directory (`clients/node`), from the compiled `dist/test/harness.js`. */
export const CLIENT_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The repository the client lives in. */
export const REPO_DIR = resolve(CLIENT_DIR, "..", "..");

const live = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of live) {
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      process.kill(child.pid, "SIGKILL");
    }
  }
});

/** The delayq binary the tests run. */
export function delayqBin(): string {
  const bin = process.env["DELAYQ_BIN"] ?? join(REPO_DIR, "target", "debug", "delayq");
  if (!existsSync(bin)) {
    throw new Error(
      `no delayq binary at ${bin}: build it with \`cargo build --bin delayq\` at the repository's root, or set DELAYQ_BIN to one`,
    );
  }
  return bin;
}

/** A free TCP port on 127.0.0.1 (free when asked: the caller retries if it is taken by then). */
export function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === "object") {
          ok(address.port);
        } else {
          fail(new Error("the kernel gave no port"));
        }
      });
    });
  });
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((ok) => setTimeout(ok, ms));
}

/** A process this harness started, with the tail of its output. */
class Owned {
  private output = "";
  /** Why it could not be started (a missing binary), once `spawn` said so. */
  startError: Error | undefined;

  constructor(readonly child: ChildProcess) {
    live.add(child);
    const keep = (chunk: Buffer): void => {
      this.output = (this.output + chunk.toString("utf8")).slice(-64 * 1024);
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    child.once("exit", () => live.delete(child));
  }

  /** The last 64 KiB of what it printed. */
  log(): string {
    return this.output;
  }

  exited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** Sends `signal` to it (by PID), if it still runs. */
  signal(signal: NodeJS.Signals): void {
    if (!this.exited() && this.child.pid !== undefined) {
      process.kill(this.child.pid, signal);
    }
  }

  /** Waits up to `ms` for it to exit; true when it did. */
  async waitExit(ms: number): Promise<boolean> {
    if (this.exited()) {
      return true;
    }
    return new Promise((ok) => {
      const timer = setTimeout(() => ok(false), ms);
      this.child.once("exit", () => {
        clearTimeout(timer);
        ok(true);
      });
    });
  }

  /** SIGTERM, then SIGKILL if it has not exited within `ms`. */
  async stop(ms = 10_000): Promise<void> {
    this.signal("SIGTERM");
    if (!(await this.waitExit(ms))) {
      this.signal("SIGKILL");
      await this.waitExit(5_000);
    }
  }
}

/** Spawns `bin` with `args`; a missing binary fails with `install`. */
function launch(bin: string, args: string[], install: string, env?: Record<string, string>): Owned {
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  const owned = new Owned(child);
  child.once("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "ENOENT") {
      owned.startError = new Error(`cannot run ${bin}: ${install}`);
    } else {
      owned.startError = e;
    }
  });
  return owned;
}

/** Polls `ready` every 50 ms until it is true, `owned` exits, or `ms` pass. */
async function waitReady(owned: Owned, ready: () => Promise<boolean>, ms: number, what: string): Promise<"ready" | "exited"> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (owned.startError !== undefined) {
      throw owned.startError;
    }
    if (owned.exited()) {
      return "exited";
    }
    if (await ready()) {
      return "ready";
    }
    await sleep(50);
  }
  await owned.stop(2_000);
  throw new Error(`${what} did not become ready within ${ms} ms; its output:\n${owned.log()}`);
}

const BIND_FAILED = /address already in use|Address already in use|could not bind|os error 98/i;

/** A `redis-server` of the tests' own on a free loopback port, without persistence. */
export class RedisServer {
  private constructor(
    private readonly owned: Owned,
    private readonly dir: string,
    /** Its port. */
    readonly port: number,
  ) {}

  /** Its URL, for `delayq serve --redis`. */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts one (`extra`: more arguments); fails with what to install when `redis-server` is missing. */
  static async start(extra: readonly string[] = []): Promise<RedisServer> {
    const bin = process.env["DELAYQ_REDIS_SERVER"] ?? "redis-server";
    for (let attempt = 0; ; attempt++) {
      const port = await freePort();
      const dir = mkdtempSync(join(tmpdir(), "delayq-node-redis-"));
      const args = ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no", ...extra];
      const owned = launch(bin, args, "install Redis 7 or newer (apt-get install redis-server), or set DELAYQ_REDIS_SERVER");
      const state = await waitReady(owned, () => pong(port), 15_000, `redis-server on port ${port}`);
      if (state === "ready") {
        return new RedisServer(owned, dir, port);
      }
      rmSync(dir, { recursive: true, force: true });
      if (attempt >= 4 || !BIND_FAILED.test(owned.log())) {
        throw new Error(`redis-server exited at start; its output:\n${owned.log()}`);
      }
    }
  }

  /** Freezes it (SIGSTOP): it accepts connections and answers nothing. */
  freeze(): void {
    this.owned.signal("SIGSTOP");
  }

  /** Thaws it after {@link RedisServer.freeze}. */
  thaw(): void {
    this.owned.signal("SIGCONT");
  }

  /** Stops it and removes its directory. */
  async stop(): Promise<void> {
    this.thaw();
    await this.owned.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The Redis Cluster hash slot of `key`: CRC16-XMODEM of its hash tag, mod 16384. */
export function keySlot(key: string): number {
  const open = key.indexOf("{");
  const close = open < 0 ? -1 : key.indexOf("}", open + 1);
  const hashed = close > open + 1 ? key.slice(open + 1, close) : key;
  let crc = 0;
  for (const byte of Buffer.from(hashed)) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) {
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
  }
  return crc % 16384;
}

/** One command to the `redis-server` on `port`: its reply's line, or a bulk reply's text; rejects an error reply. */
export function redisCommand(port: number, ...args: string[]): Promise<string> {
  return new Promise((ok, fail) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    let got = Buffer.alloc(0);
    socket.setTimeout(5_000, () => {
      socket.destroy();
      fail(new Error(`redis-server :${port} did not answer ${args.join(" ")}`));
    });
    socket.once("error", fail);
    socket.once("connect", () => {
      const parts = args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`);
      socket.write(`*${args.length}\r\n${parts.join("")}`);
    });
    socket.on("data", (d) => {
      got = Buffer.concat([got, d]);
      const end = got.indexOf("\r\n");
      if (end < 0) {
        return;
      }
      const head = got.subarray(0, end).toString();
      const rest = got.subarray(end + 2);
      if (head.startsWith("$")) {
        const n = Number(head.slice(1));
        if (n >= 0 && rest.length < n + 2) {
          return;
        }
      }
      socket.destroy();
      if (head.startsWith("-")) {
        fail(new Error(`redis-server :${port} answered ${args.join(" ")} with ${head}`));
      } else {
        ok(head.startsWith("$") ? rest.subarray(0, rest.length - 2).toString() : head.slice(1));
      }
    });
  });
}

/** Three `redis-server` primaries of the tests' own (no replicas), each serving a third of the slots, joined into one cluster. */
export class RedisCluster {
  private constructor(
    /** The primaries. */
    readonly nodes: readonly RedisServer[],
    private readonly ranges: readonly (readonly [number, number])[],
  ) {}

  /** Its URL, for `delayq serve --redis`. */
  get url(): string {
    return `redis+cluster://${this.nodes.map((n) => `127.0.0.1:${n.port}`).join(",")}`;
  }

  /** Starts the three nodes and joins them; fails when they do not form a cluster within 30 s. */
  static async start(): Promise<RedisCluster> {
    const nodes: RedisServer[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        nodes.push(await RedisServer.start(["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]));
      }
      const third = Math.floor(16384 / 3);
      const ranges: [number, number][] = [
        [0, third - 1],
        [third, 2 * third - 1],
        [2 * third, 16383],
      ];
      for (const [i, node] of nodes.entries()) {
        const [first, last] = ranges[i] as [number, number];
        await redisCommand(node.port, "CLUSTER", "ADDSLOTSRANGE", String(first), String(last));
      }
      for (const node of nodes.slice(1)) {
        await redisCommand(node.port, "CLUSTER", "MEET", "127.0.0.1", String((nodes[0] as RedisServer).port));
      }
      const deadline = Date.now() + 30_000;
      for (;;) {
        const states = await Promise.all(nodes.map((n) => redisCommand(n.port, "CLUSTER", "INFO")));
        if (states.every((s) => s.includes("cluster_state:ok"))) {
          return new RedisCluster(nodes, ranges);
        }
        if (Date.now() > deadline) {
          throw new Error(`the three redis-servers did not form a cluster in 30 s: ${states.join(" | ")}`);
        }
        await sleep(100);
      }
    } catch (e) {
      await Promise.all(nodes.map((n) => n.stop()));
      throw e;
    }
  }

  /** The primary serving `key`'s slot. */
  nodeOf(key: string): RedisServer {
    const slot = keySlot(key);
    const i = this.ranges.findIndex(([first, last]) => first <= slot && slot <= last);
    return this.nodes[i] as RedisServer;
  }

  /** Stops every node (thawed first). */
  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
  }
}

/** True when Redis on `port` answers PING. */
function pong(port: number): Promise<boolean> {
  return new Promise((ok) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    let got = "";
    const done = (v: boolean): void => {
      socket.destroy();
      ok(v);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.on("data", (d) => {
      got += d.toString("latin1");
      if (got.includes("\r\n")) {
        done(got.startsWith("+PONG"));
      }
    });
  });
}

/** How to start a {@link DelayqServer}. */
export interface ServerOptions {
  /** The engine (default embedded). Redis starts a `redis-server` of its own unless `redisUrl`. */
  readonly engine?: Engine;
  /** A Redis to use instead of starting one (the caller owns it). */
  readonly redisUrl?: string;
  /** More arguments for `delayq serve`. */
  readonly args?: readonly string[];
  /** Serve HTTPS with this certificate and key (PEM files); the probe trusts `ca` (PEM text). */
  readonly tls?: { readonly cert: string; readonly key: string; readonly ca: string };
  /** Listen on this port (to restart a server where it was) instead of a free one. */
  readonly port?: number;
  /** The embedded engine's data directory, which the caller owns, instead of a temporary one. */
  readonly dataDir?: string;
}

/** A `delayq serve` of the tests' own. */
export class DelayqServer {
  private constructor(
    private readonly owned: Owned,
    private readonly dataDir: string,
    /** Its base URL, e.g. `http://127.0.0.1:40123`. */
    readonly url: string,
    private readonly redis: RedisServer | undefined,
  ) {}

  /** The Redis it runs on, when it started one. */
  get ownRedis(): RedisServer | undefined {
    return this.redis;
  }

  /** Its PID. */
  get pid(): number {
    return this.owned.child.pid ?? -1;
  }

  /** Starts one and waits until `GET /healthz` answers 200. */
  static async start(options: ServerOptions = {}): Promise<DelayqServer> {
    const bin = delayqBin();
    const engine = options.engine ?? "embedded";
    const redis = engine === "redis" && options.redisUrl === undefined ? await RedisServer.start() : undefined;
    try {
      for (let attempt = 0; ; attempt++) {
        const port = options.port ?? (await freePort());
        const dataDir = mkdtempSync(join(tmpdir(), "delayq-node-server-"));
        const args = ["serve", "--listen", `127.0.0.1:${port}`, ...(options.args ?? [])];
        if (engine === "redis") {
          args.push("--redis", options.redisUrl ?? (redis as RedisServer).url);
        } else {
          args.push("--data-dir", options.dataDir ?? join(dataDir, "data"));
        }
        if (options.tls !== undefined) {
          args.push("--tls-cert", options.tls.cert, "--tls-key", options.tls.key);
        }
        const scheme = options.tls === undefined ? "http" : "https";
        const url = `${scheme}://127.0.0.1:${port}`;
        const owned = launch(bin, args, "build it with `cargo build --bin delayq`, or set DELAYQ_BIN");
        const probe = (): Promise<boolean> => healthy(url, options.tls?.ca);
        const state = await waitReady(owned, probe, 20_000, `delayq serve on port ${port}`);
        if (state === "ready") {
          return new DelayqServer(owned, dataDir, url, redis);
        }
        rmSync(dataDir, { recursive: true, force: true });
        if (attempt >= 4 || options.port !== undefined || !BIND_FAILED.test(owned.log())) {
          throw new Error(`delayq serve exited at start; its output:\n${owned.log()}`);
        }
      }
    } catch (e) {
      await redis?.stop();
      throw e;
    }
  }

  /** The last 64 KiB of its log. */
  log(): string {
    return this.owned.log();
  }

  /** Stops it (SIGTERM, then SIGKILL), its Redis if it started one, and removes its data. */
  async stop(): Promise<void> {
    await this.owned.stop();
    await this.redis?.stop();
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** True when `GET /healthz` answers 200 within a second. */
function healthy(url: string, ca: string | undefined): Promise<boolean> {
  return new Promise((ok) => {
    const get = url.startsWith("https:") ? httpsGet : httpGet;
    const req = get(`${url}/healthz`, { timeout: 1_000, ...(ca === undefined ? {} : { ca }) }, (res) => {
      res.resume();
      ok(res.statusCode === 200);
    });
    req.once("timeout", () => req.destroy());
    req.once("error", () => ok(false));
    req.end();
  });
}

/** A Node script of this client (a compiled example, benchmark or test helper) in a child process. */
export class NodeChild {
  private constructor(private readonly owned: Owned) {}

  /** Runs `script` (relative to `dist/`) with `args` and extra environment `env`. */
  static start(script: string, args: readonly string[] = [], env: Record<string, string> = {}): NodeChild {
    const path = join(CLIENT_DIR, "dist", script);
    return new NodeChild(launch(process.execPath, [path, ...args], "", env));
  }

  /** Its PID. */
  get pid(): number {
    return this.owned.child.pid ?? -1;
  }

  /** What it printed so far (stdout and stderr). */
  output(): string {
    return this.owned.log();
  }

  /** Its exit code, once it exited (null after a signal). */
  get exitCode(): number | null {
    return this.owned.child.exitCode;
  }

  /** Waits until its output matches `pattern`, up to `ms`; fails with its output. */
  async waitFor(pattern: RegExp, ms: number): Promise<RegExpMatchArray> {
    const deadline = Date.now() + ms;
    for (;;) {
      const m = this.owned.log().match(pattern);
      if (m !== null) {
        return m;
      }
      if (this.owned.exited() || Date.now() > deadline) {
        throw new Error(`no ${pattern} in the child's output within ${ms} ms; it printed:\n${this.owned.log()}`);
      }
      await sleep(20);
    }
  }

  /** Sends it `signal` (by PID). */
  signal(signal: NodeJS.Signals): void {
    this.owned.signal(signal);
  }

  /** Waits up to `ms` for it to exit; true when it did. */
  waitExit(ms: number): Promise<boolean> {
    return this.owned.waitExit(ms);
  }

  /** Stops it if it still runs. */
  stop(): Promise<void> {
    return this.owned.stop(5_000);
  }
}

/** A topic name of its own for one test. */
export function topicName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Polls `check` every 20 ms until it answers true; fails with `what` after `ms`. */
export async function waitUntil(check: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    }
    await sleep(20);
  }
}
