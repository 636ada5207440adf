/**
 * An `https://` server with a self-signed certificate: Node's `fetch` takes no CA option,
 * so the client trusts it through `NODE_EXTRA_CA_CERTS` (read at Node's start, so each
 * case runs in a process of its own). Needs `openssl` to make the certificate.
 *
 * @module
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { DelayqServer, NodeChild } from "../harness.js";

describe("https with a custom CA", () => {
  let dir: string;
  let server: DelayqServer;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "delayq-node-tls-"));
    const [cert, key] = [join(dir, "cert.pem"), join(dir, "key.pem")];
    try {
      execFileSync("openssl", [
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        "-keyout", key, "-out", cert, "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
      ], { stdio: "pipe" });
    } catch (e) {
      throw new Error(`cannot make a test certificate with openssl (apt-get install openssl): ${String(e)}`);
    }
    server = await DelayqServer.start({ tls: { cert, key, ca: readFileSync(cert, "utf8") } });
  });

  after(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function push(env: Record<string, string>): Promise<string> {
    const child = NodeChild.start("test/fixtures/push-child.js", [], { DELAYQ_SERVER: server.url, ...env });
    try {
      return (await child.waitFor(/^(pushed|failed) .*$/m, 15_000))[0];
    } finally {
      await child.stop();
    }
  }

  it("trusts the server's certificate given in NODE_EXTRA_CA_CERTS", async () => {
    assert.match(await push({ NODE_EXTRA_CA_CERTS: join(dir, "cert.pem") }), /^pushed /);
  });

  it("refuses it without, with a ConnectionError that names the certificate", async () => {
    assert.match(await push({ NODE_EXTRA_CA_CERTS: "" }), /^failed ConnectionError: .*certificate/i);
  });
});
