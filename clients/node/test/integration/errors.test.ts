/**
 * Each error code of the API, provoked on a real server and thrown as its class, and the
 * client's own errors: an unreachable server, a request over its timeout. Codes that need
 * a server started a certain way (tokens, a read-only dashboard, one long-poll, Redis
 * frozen, stopped or without replicas) each get one of their own.
 *
 * `already_exists` and `internal` cannot be provoked through the API (no route pushes
 * with "fail if it exists", and an internal error is a bug); the unit tests map them.
 *
 * @module
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import {
  BodyTooLargeError,
  Client,
  ConnectionError,
  InvalidArgumentError,
  InvalidDelayError,
  InvalidIdError,
  InvalidReceiptError,
  InvalidRequestError,
  InvalidTopicError,
  InvalidTtrError,
  LeaseLostError,
  MethodNotAllowedError,
  NotFoundError,
  NotReplicatedError,
  OverloadedError,
  ReadOnlyError,
  RequestTimeoutError,
  ServerTimeoutError,
  UnauthorizedError,
  UnavailableError,
  WrongStateError,
  type ApiError,
} from "../../src/index.js";
import type { PushRequest, Route } from "../../src/openapi.js";
import { DelayqServer, RedisServer, freePort, topicName } from "../harness.js";

/** Asserts that `call` rejects with an instance of `kind` with `code` and `status`. */
async function rejectsWith(
  call: Promise<unknown>,
  kind: abstract new (...args: never[]) => ApiError,
  code: string,
  status: number,
): Promise<ApiError> {
  let caught: unknown;
  await assert.rejects(call, (e: unknown) => {
    caught = e;
    return true;
  });
  assert.ok(caught instanceof kind, `expected ${kind.name}, got ${String(caught)}`);
  assert.equal(caught.code, code);
  assert.equal(caught.status, status);
  return caught;
}

/**
 * Calls `call` until it fails with an error that is not a `kind`, and answers that error;
 * fails when `call` succeeds, or when `ms` pass with only `kind`s.
 */
async function firstErrorOtherThan(
  kind: abstract new (...args: never[]) => Error,
  call: () => Promise<unknown>,
  ms: number,
): Promise<unknown> {
  const deadline = Date.now() + ms;
  for (let calls = 1; ; calls++) {
    const outcome = await call().then(
      (value: unknown) => ({ value }),
      (error: unknown) => ({ error }),
    );
    if (!("error" in outcome)) {
      assert.fail(`call ${calls} succeeded: ${JSON.stringify(outcome.value)}`);
    }
    if (!(outcome.error instanceof kind)) {
      return outcome.error;
    }
    if (Date.now() > deadline) {
      assert.fail(`${calls} calls in ${ms} ms each failed with ${kind.name}: ${String(outcome.error)}`);
    }
  }
}

describe("error codes (embedded)", () => {
  let server: DelayqServer;
  let client: Client;

  before(async () => {
    server = await DelayqServer.start();
    client = new Client({ url: server.url });
  });

  after(async () => {
    await server.stop();
  });

  it("invalid input: 400 with the code of the field at fault", async () => {
    const topic = topicName("invalid");
    await rejectsWith(client.push("not a topic!", "x"), InvalidTopicError, "invalid_topic", 400);
    const e = await rejectsWith(client.push(topic, "x", { id: "a b" }), InvalidIdError, "invalid_id", 400);
    assert.equal(e.field, "/id");
    await rejectsWith(client.push(topic, "x", { delayMs: -1 }), InvalidDelayError, "invalid_delay", 400);
    await rejectsWith(client.push(topic, "x", { ttrMs: 10 }), InvalidTtrError, "invalid_ttr", 400);
    await rejectsWith(client.ack("not-a-receipt!"), InvalidReceiptError, "invalid_receipt", 400);
    await rejectsWith(client.list(topic, "ready", { limit: 0 }), InvalidArgumentError, "invalid_argument", 400);
    const batch = client.pushBatch(topic, [{ body: "x" }, { body: "x", maxAttempts: 0 }]);
    const item = await rejectsWith(batch, InvalidArgumentError, "invalid_argument", 400);
    assert.deepEqual([item.index, item.field], [1, "/jobs/1/max_attempts"]);
    // The typed client cannot send an unknown field; the transport can, when told to.
    const body = { body: "x", colour: "blue" } as unknown as PushRequest;
    const call = client.http.call("POST /v1/topics/{topic}/jobs", { path: { topic }, body });
    await rejectsWith(call, InvalidRequestError, "invalid_request", 400);
  });

  it("body_too_large: 413 over the topic's limit", async () => {
    const topic = topicName("large");
    await client.setTopicSettings(topic, { maxBody: 10 });
    await rejectsWith(client.push(topic, "x".repeat(11)), BodyTooLargeError, "body_too_large", 413);
  });

  it("not_found, wrong_state and lease_lost", async () => {
    const topic = topicName("conflicts");
    await rejectsWith(client.get(topic, "nope"), NotFoundError, "not_found", 404);
    await client.push(topic, "x", { id: "a" });
    await rejectsWith(client.kick(topic, "a"), WrongStateError, "wrong_state", 409);
    await rejectsWith(client.ack({ topic, id: "a", token: 1 }), WrongStateError, "wrong_state", 409);
    const [d] = (await client.reserve([topic], { max: 1 })).deliveries;
    assert.ok(d !== undefined);
    await client.nack(d, { delayMs: 3_600_000 });
    await rejectsWith(client.ack(d), LeaseLostError, "lease_lost", 409);
  });

  it("method_not_allowed: 405 for a method a route does not take", async () => {
    const call = client.http.call("DELETE /v1/reserve" as Route, {} as never);
    await rejectsWith(call, MethodNotAllowedError, "method_not_allowed", 405);
  });

  it("an unreachable server is a ConnectionError, retryable", async () => {
    const closed = new Client({ url: `http://127.0.0.1:${await freePort()}` });
    let caught: unknown;
    await assert.rejects(closed.stats("t"), (e: unknown) => {
      caught = e;
      return true;
    });
    assert.ok(caught instanceof ConnectionError, String(caught));
    assert.equal(caught.code, "unreachable");
    assert.equal(caught.retryable, true);
    assert.match(caught.message, /ECONNREFUSED/);
  });
});

describe("error codes of servers started for them", () => {
  it("unauthorized: 401 without the bearer token; the token is sent when given", async () => {
    const token = "a-long-enough-test-token";
    const server = await DelayqServer.start({ args: ["--token", token] });
    try {
      await rejectsWith(new Client({ url: server.url, token: "" }).stats("t"), UnauthorizedError, "unauthorized", 401);
      await rejectsWith(new Client({ url: server.url, token: "wrong-but-long-enough" }).stats("t"), UnauthorizedError, "unauthorized", 401);
      assert.equal((await new Client({ url: server.url, token }).stats("t")).topic, "t");
    } finally {
      await server.stop();
    }
  });

  it("read_only: 403 for a change the dashboard asks of a read-only server", async () => {
    const server = await DelayqServer.start({ args: ["--ui", "read-only"] });
    try {
      const client = new Client({ url: server.url });
      const call = client.http.call("POST /v1/topics/{topic}/kick", { path: { topic: "t" } }, { headers: { "x-delayq-ui": "1" } });
      await rejectsWith(call, ReadOnlyError, "read_only", 403);
      assert.equal(await client.kickAll("t"), 0, "the API itself keeps its rights");
    } finally {
      await server.stop();
    }
  });

  it("overloaded: 503 past the server's long-polls", async () => {
    const server = await DelayqServer.start({ args: ["--max-long-polls", "1"] });
    const client = new Client({ url: server.url });
    const stop = new AbortController();
    try {
      // Two long-polls at once on a server that keeps one open: whichever comes second is
      // refused at once, while the other waits.
      const polls = [0, 1].map(() =>
        client.reserve(["t"], { waitMs: 10_000, signal: stop.signal }).then(
          () => undefined,
          (e: unknown) => e,
        ),
      );
      const first = await Promise.race(polls);
      assert.ok(first instanceof OverloadedError, String(first));
      assert.deepEqual([first.code, first.status, first.retryable], ["overloaded", 503, true]);
      stop.abort();
      await Promise.all(polls);
    } finally {
      stop.abort();
      await server.stop();
    }
  });

  it("timeout, unavailable (Redis frozen, then gone), and the client's own timeout", { timeout: 60_000 }, async () => {
    const redis = await RedisServer.start();
    const server = await DelayqServer.start({
      engine: "redis",
      redisUrl: redis.url,
      args: ["--max-wait", "500ms", "--request-timeout", "1s"],
    });
    try {
      const client = new Client({ url: server.url });
      await client.push("t", "x");
      redis.freeze();
      const e = await rejectsWith(client.stats("t"), ServerTimeoutError, "timeout", 503);
      assert.equal(e.retryable, true);
      const impatient = new Client({ url: server.url, timeoutMs: 200 });
      let caught: unknown;
      await impatient.stats("t").catch((x: unknown) => (caught = x));
      assert.ok(caught instanceof RequestTimeoutError, String(caught));
      assert.deepEqual([caught.code, caught.retryable], ["request_timeout", true]);
      redis.thaw();
      await redis.stop();
      // Redis is gone. The server's connection reconnects on its own, up to 3 tries with a
      // jittered back-off (up to about 1.4 s in all), started by the first of its calls to
      // find the connection closed. That may be one of the server's background tasks: a
      // request that comes meanwhile waits for those tries, and past the 1 s request
      // timeout is answered `timeout` (503, retryable) instead. Once the tries have failed,
      // the next request is answered `unavailable` at once. (Bug 17 of issue 36: this
      // asserted `unavailable` for the first request and failed now and then under load.)
      const gone = await firstErrorOtherThan(ServerTimeoutError, () => client.stats("t"), 15_000);
      await rejectsWith(Promise.reject(gone), UnavailableError, "unavailable", 503);
    } finally {
      await server.stop();
      await redis.stop();
    }
  });

  it("not_replicated: 503 when Redis has fewer replicas than the server waits for", async () => {
    const server = await DelayqServer.start({
      engine: "redis",
      args: ["--redis-wait-replicas", "1", "--redis-wait-timeout", "100ms"],
    });
    try {
      const e = await rejectsWith(new Client({ url: server.url }).push("t", "x"), NotReplicatedError, "not_replicated", 503);
      assert.equal(e.retryable, true);
    } finally {
      await server.stop();
    }
  });
});
