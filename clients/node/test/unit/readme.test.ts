/**
 * The README shows the order-cancel example's code as it is in `examples/order-cancel/`
 * (from its first import on), so what the README shows is what the examples test runs.
 *
 * @module
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { CLIENT_DIR } from "../harness.js";

describe("README", () => {
  it("shows the order-cancel example's code as the example files have it", () => {
    const readme = readFileSync(join(CLIENT_DIR, "README.md"), "utf8");
    for (const file of ["producer.ts", "worker.ts"]) {
      const block = readme.match(new RegExp(`<!-- example: ${file.replace(".", "\\.")} -->\\n\`\`\`ts\\n([\\s\\S]*?)\`\`\`\\n`));
      assert.ok(block?.[1] !== undefined, `no block marked ${file} in the README`);
      const source = readFileSync(join(CLIENT_DIR, "examples", "order-cancel", file), "utf8");
      const code = source.slice(source.indexOf("import "));
      assert.equal(block[1], code, `the README's ${file} differs from examples/order-cancel/${file}`);
    }
  });
});
