/**
 * `npm run generate`: starts a delayq server (the harness's binary: `$DELAYQ_BIN`, else the
 * repository's debug build), reads its `/v1/openapi.json` and writes `src/openapi.ts`.
 *
 * @module
 */

import { writeFileSync } from "node:fs";
import { join } from "node:path";

import { CLIENT_DIR, DelayqServer } from "../test/harness.js";
import { render, type Document } from "./openapi-gen.js";

const server = await DelayqServer.start();
try {
  const res = await fetch(`${server.url}/v1/openapi.json`);
  const doc = (await res.json()) as Document;
  const target = join(CLIENT_DIR, "src", "openapi.ts");
  writeFileSync(target, render(doc));
  console.log(`wrote ${target}`);
} finally {
  await server.stop();
}
