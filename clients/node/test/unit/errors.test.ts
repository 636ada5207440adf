/**
 * The error table: each code of the API to its class, status and retryability, and what
 * an unknown code becomes.
 *
 * @module
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  AlreadyExistsError,
  ApiError,
  ConflictError,
  ERROR_CLASSES,
  EngineFullError,
  InternalError,
  InvalidInputError,
  LeaseLostError,
  PartitionsInUseError,
  ServiceUnavailableError,
  type ErrorCode,
} from "../../src/index.js";
import { apiError, endsDelivery } from "../../src/errors.js";

const STATUS: Record<ErrorCode, number> = {
  invalid_topic: 400,
  invalid_id: 400,
  invalid_delay: 400,
  invalid_ttr: 400,
  invalid_receipt: 400,
  invalid_argument: 400,
  invalid_request: 400,
  body_too_large: 413,
  unauthorized: 401,
  read_only: 403,
  not_found: 404,
  method_not_allowed: 405,
  lease_lost: 409,
  wrong_state: 409,
  already_exists: 409,
  partitions_in_use: 409,
  unavailable: 503,
  engine_full: 503,
  not_replicated: 503,
  timeout: 503,
  overloaded: 503,
  internal: 500,
};

describe("errors", () => {
  it("maps each code to its class, its usual status and whether a retry may help", () => {
    for (const [code, kind] of Object.entries(ERROR_CLASSES) as [ErrorCode, (typeof ERROR_CLASSES)[ErrorCode]][]) {
      const e = apiError({ code, message: `about ${code}`, field: "/x", index: 2 });
      assert.ok(e instanceof kind, code);
      assert.equal(e.name, kind.name);
      assert.deepEqual([e.code, e.status, e.message, e.field, e.index], [code, STATUS[code], `about ${code}`, "/x", 2]);
      assert.equal(e.retryable, STATUS[code] === 503, code);
      assert.equal(e instanceof InvalidInputError, STATUS[code] === 400, code);
      assert.equal(e instanceof ConflictError, STATUS[code] === 409, code);
      assert.equal(e instanceof ServiceUnavailableError, STATUS[code] === 503, code);
    }
  });

  it("a full engine is a retryable 503", () => {
    const e = apiError({ code: "engine_full", message: "engine full: m" });
    assert.ok(e instanceof EngineFullError);
    assert.ok(e instanceof ServiceUnavailableError);
    assert.deepEqual([e.status, e.retryable, endsDelivery(e)], [503, true, false]);
  });

  it("a partition count in use is a 409 conflict, not retried", () => {
    const e = apiError({ code: "partitions_in_use", message: "cannot change" });
    assert.ok(e instanceof PartitionsInUseError);
    assert.ok(e instanceof ConflictError);
    assert.deepEqual([e.status, e.retryable], [409, false]);
  });

  it("keeps the status the server answered with", () => {
    assert.equal(apiError({ code: "internal", message: "m" }, 500).status, 500);
    assert.ok(apiError({ code: "internal", message: "m" }) instanceof InternalError);
    assert.ok(apiError({ code: "already_exists", message: "m" }) instanceof AlreadyExistsError);
  });

  it("an unknown code is a plain ApiError that keeps it", () => {
    const e = apiError({ code: "brand_new", message: "m" }, 418);
    assert.equal(Object.getPrototypeOf(e), ApiError.prototype);
    assert.deepEqual([e.code, e.status, e.retryable], ["brand_new", 418, false]);
  });

  it("the errors that end a delivery for its holder", () => {
    for (const code of ["lease_lost", "not_found", "wrong_state"] as const) {
      assert.ok(endsDelivery(apiError({ code, message: "m" })), code);
    }
    assert.ok(!endsDelivery(apiError({ code: "unavailable", message: "m" })));
    assert.ok(!endsDelivery(new Error("x")));
    assert.ok(new LeaseLostError(409, { code: "lease_lost", message: "m" }) instanceof ConflictError);
  });
});
