/**
 * The client against the server's own `/v1/openapi.json`, so that the two cannot drift:
 *
 * - `src/openapi.ts`, which types every request the client builds and every answer it
 *   reads (field names, and which are required), is what the document gives today;
 * - every `"METHOD /path"` the client calls is an operation of the document;
 * - the requests the client's conversions build carry only fields of their schema, and
 *   every field it requires;
 * - the table of error classes covers exactly the error codes the document lists (in the
 *   description of `ErrorDetail.code`: the document has no `enum` for them).
 *
 * @module
 */

import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { ERROR_CLASSES } from "../../src/index.js";
import {
  leaseBody,
  pushToWire,
  scheduleToWire,
  settingsToWire,
  settlementToWire,
} from "../../src/wire.js";
import { render, routes, type Document, type Schema } from "../../tools/openapi-gen.js";
import { CLIENT_DIR, DelayqServer } from "../harness.js";

/** The TypeScript sources of the client (not the generated file), by path. */
function sources(dir = join(CLIENT_DIR, "src")): Map<string, string> {
  const out = new Map<string, string>();
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      for (const [p, text] of sources(path)) {
        out.set(p, text);
      }
    } else if (entry.name.endsWith(".ts") && entry.name !== "openapi.ts") {
      out.set(path, readFileSync(path, "utf8"));
    }
  }
  return out;
}

describe("the client against the server's OpenAPI document", () => {
  let server: DelayqServer;
  let doc: Document;

  before(async () => {
    server = await DelayqServer.start();
    doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as Document;
  });

  after(async () => {
    await server.stop();
  });

  it("src/openapi.ts is generated from the server's document as it is now", () => {
    const committed = readFileSync(join(CLIENT_DIR, "src", "openapi.ts"), "utf8");
    const fresh = render(doc);
    if (committed !== fresh) {
      const a = committed.split("\n");
      const b = fresh.split("\n");
      const line = a.findIndex((l, i) => l !== b[i]);
      assert.fail(
        `src/openapi.ts differs from the server's document from line ${line + 1}:\n` +
          `  committed: ${a[line] ?? "(end)"}\n  document:  ${b[line] ?? "(end)"}\n` +
          "run `npm run generate` in clients/node (it starts the server), then fix what no longer type-checks",
      );
    }
  });

  it("every route the client calls is an operation of the document", () => {
    const known = new Set(routes(doc));
    const called = new Set<string>();
    for (const text of sources().values()) {
      for (const m of text.matchAll(/"((?:GET|POST|PUT|DELETE|PATCH) \/v1\/[^"]*)"/g)) {
        called.add(m[1] as string);
      }
    }
    assert.ok(called.size >= 25, `found only ${called.size} routes in the client's sources`);
    const unknown = [...called].filter((r) => !known.has(r));
    assert.deepEqual(unknown, [], "routes the client calls that the document does not have");
  });

  it("the requests the client builds carry only their schema's fields, and its required ones", () => {
    const schemas = doc.components.schemas;
    const check = (name: string, value: object): void => {
      const schema = schemas[name] as Schema;
      const props = Object.keys(schema.properties ?? {});
      const sent = Object.entries(value)
        .filter(([, v]) => v !== undefined)
        .map(([k]) => k);
      assert.deepEqual(sent.filter((k) => !props.includes(k)), [], `fields of ${name} the document does not have`);
      for (const required of schema.required ?? []) {
        assert.ok(sent.includes(required), `${name} needs ${required}`);
      }
    };
    const backoff = { kind: "exponential", baseMs: 1, factor: 2, maxMs: 10, jitter: 0.1 } as const;
    const push = pushToWire(new Uint8Array([1]), {
      id: "i",
      delayMs: 1,
      at: 0,
      priority: 1,
      ttrMs: 1_000,
      maxAttempts: 1,
      backoff,
      onConflict: "debounce",
      maxWaitMs: 1,
      maxLatenessMs: 1,
      expiresAt: 1,
      onExpire: "drop",
    });
    check("PushRequest", push);
    check("BackoffDto", push.backoff as object);
    const lease = { topic: "t", id: "i", token: 1 };
    for (const s of [
      { lease, outcome: "ack" },
      { lease, outcome: "release" },
      { lease: { ...lease, receipt: "r" }, outcome: "nack", delayMs: 1, reason: "r" },
      { lease, outcome: "bury", reason: "r" },
    ] as const) {
      check("SettleItem", settlementToWire(s));
    }
    check("TokenRequest", leaseBody(lease));
    check("TokenRequest", leaseBody({ topic: "t", id: "i", receipt: "r" }));
    const settings = settingsToWire({ ttrMs: 1, maxAttempts: 1, backoff, maxBody: 1, retention: { maxJobs: 1, maxAgeMs: 1 } });
    check("TopicConfigDto", settings);
    check("RetentionDto", settings.retention as object);
    check(
      "ScheduleRequest",
      scheduleToWire({
        cron: "* * * * *",
        topic: "t",
        body: new Uint8Array([1]),
        timeZone: "UTC",
        priority: 1,
        ttrMs: 1_000,
        maxAttempts: 1,
        backoff,
        start: 0,
        end: 1,
        jitterMs: 1,
        misfire: "each",
        misfireLimit: 1,
      }),
    );
  });

  it("the error classes cover exactly the error codes the document lists", () => {
    const detail = doc.components.schemas["ErrorDetail"] as Schema;
    const description = detail.properties?.["code"]?.description ?? "";
    const listed = [...description.matchAll(/`([a-z_]+)`/g)].map((m) => m[1] as string).sort();
    assert.ok(listed.length >= 15, `the document lists only ${listed.length} codes: ${description}`);
    assert.deepEqual(Object.keys(ERROR_CLASSES).sort(), listed);
  });
});
