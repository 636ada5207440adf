/**
 * What the transport makes of answers that are not delayq's: a proxy in front of the
 * server that answers with an HTML page, or nothing at all. The stand-in here is a plain
 * HTTP server, a proxy and not delayq.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { after, before, describe, it } from "node:test";

import { Client, RequestTimeoutError, ResponseError } from "../../src/index.js";

describe("transport", () => {
  let proxy: Server;
  let url: string;

  before(async () => {
    proxy = createServer((req, res) => {
      if (req.url?.includes("/silent/") === true) {
        return; // never answers
      }
      res.writeHead(502, { "content-type": "text/html" }).end("<html>Bad Gateway</html>");
    });
    await new Promise<void>((ok) => proxy.listen(0, "127.0.0.1", ok));
    const address = proxy.address();
    assert.ok(address !== null && typeof address === "object");
    url = `http://127.0.0.1:${address.port}`;
  });

  after(async () => {
    proxy.closeAllConnections();
    await new Promise((ok) => proxy.close(ok));
  });

  it("an answer that is not delayq's is a ResponseError with its status", async () => {
    let caught: unknown;
    await new Client({ url }).stats("t").catch((e: unknown) => (caught = e));
    assert.ok(caught instanceof ResponseError, String(caught));
    assert.deepEqual([caught.code, caught.status, caught.retryable], ["bad_response", 502, true]);
    assert.match(caught.message, /Bad Gateway/);
  });

  it("no answer within the timeout is a RequestTimeoutError; an abort is the caller's", async () => {
    const client = new Client({ url, timeoutMs: 100 });
    await assert.rejects(client.stats("silent"), RequestTimeoutError);
    const stop = new AbortController();
    const call = client.stats("silent", { signal: stop.signal, timeoutMs: 10_000 });
    stop.abort(new Error("caller gave up"));
    await assert.rejects(call, /caller gave up/);
  });
});
