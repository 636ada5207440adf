/**
 * The errors of the client: one class per error code of the API (an {@link ApiError} with
 * the HTTP status, the code, and the request field at fault when there is one), grouped by
 * what a caller does about them, and the client's own: {@link ConnectionError} when the
 * server cannot be reached, {@link RequestTimeoutError} when it did not answer in time and
 * {@link ResponseError} when its answer is not delayq's.
 *
 * ```ts
 * try {
 *   await client.ack(delivery);
 * } catch (e) {
 *   if (e instanceof LeaseLostError) {
 *     // The lease ran out and the job went on without us: nothing to undo.
 *   } else if (e instanceof DelayqError && e.retryable) {
 *     // The server or its store is down or overloaded: try again later.
 *   } else {
 *     throw e;
 *   }
 * }
 * ```
 *
 * @module
 */

import type { ErrorDetail } from "./openapi.js";
import type { PushResult } from "./pushed.js";

/** Every error this client throws about a call to delayq. */
export class DelayqError extends Error {
  /** The API's error code (`not_found`, `lease_lost` ...) or the client's own (`unreachable` ...). */
  readonly code: string;

  constructor(code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }

  /** True when the same call may succeed later unchanged (the server or its store is down or busy). */
  get retryable(): boolean {
    return false;
  }
}

/** An error answered by the server: `{"error": {"code", "message", "field"?, "index"?}}`. */
export class ApiError extends DelayqError {
  /** The HTTP status. */
  readonly status: number;
  /** The JSON pointer of the request field at fault (`/jobs/1/delay_ms`), if the error is about one. */
  readonly field: string | undefined;
  /** The index of the list item at fault (a job of a batch, a lease of a batch ack ...), if any. */
  readonly index: number | undefined;
  /** The whole error answer, for what it carries besides `error` (a partial batch push's `results` and `ids`). */
  readonly answer: unknown;
  /**
   * A batch push some of whose jobs were stored and others not (on a Redis Cluster whose
   * primary holding some of the topic's partitions is down): one per job, in order, its
   * answer when stored, `null` when not. Push only the jobs not stored again, with their
   * {@link ApiError.ids}: pushing the whole batch again would create again a stored job that
   * was meanwhile delivered and acked. Undefined otherwise.
   */
  results: (PushResult | null)[] | undefined;
  /** With {@link ApiError.results}: every job's id, in order, generated ones included. */
  ids: string[] | undefined;

  constructor(status: number, detail: ErrorDetail, answer?: unknown) {
    super(detail.code, detail.message);
    this.status = status;
    this.field = detail.field ?? undefined;
    this.index = detail.index ?? undefined;
    this.answer = answer;
    this.results = undefined;
    this.ids = undefined;
  }
}

/** 400: the request was refused as it is; nothing was changed. Fix the input. */
export class InvalidInputError extends ApiError {}
/** 400 `invalid_topic`: a topic name outside 1 to 200 characters of `A-Za-z0-9_.:-`. */
export class InvalidTopicError extends InvalidInputError {}
/** 400 `invalid_id`: a job id outside 1 to 200 visible ASCII characters. */
export class InvalidIdError extends InvalidInputError {}
/** 400 `invalid_delay`: a delay or due time out of range, or both given. */
export class InvalidDelayError extends InvalidInputError {}
/** 400 `invalid_ttr`: a lease length outside 1 s to 24 h. */
export class InvalidTtrError extends InvalidInputError {}
/** 400 `invalid_receipt`: a string that is not a receipt this server handed out. */
export class InvalidReceiptError extends InvalidInputError {}
/** 400 `invalid_argument`: another value out of range. */
export class InvalidArgumentError extends InvalidInputError {}
/** 400 `invalid_request`: the request could not be read (not JSON, an unknown field ...). */
export class InvalidRequestError extends InvalidInputError {}
/** 413 `body_too_large`: the job body or the request is over the server's or the topic's limit. */
export class BodyTooLargeError extends ApiError {}
/** 401 `unauthorized`: a bearer token is missing or wrong (the client's `token`). */
export class UnauthorizedError extends ApiError {}
/** 403 `read_only`: the dashboard of a read-only server asked for a change. */
export class ReadOnlyError extends ApiError {}
/**
 * 404 `not_found`: no such job, schedule or route (a job acked, deleted or purged is gone),
 * or, for a purge or a resume, no such topic (no jobs, no settings, no pause: a typo?).
 */
export class NotFoundError extends ApiError {}
/** 405 `method_not_allowed`: the route does not take that method. */
export class MethodNotAllowedError extends ApiError {}
/** 409: the job is not in a state the operation applies to; nothing was changed. */
export class ConflictError extends ApiError {}
/**
 * 409 `lease_lost`: the delivery existed and moved on (its lease expired, or the job was
 * nacked, delivered again, or acked): this holder no longer answers for it.
 */
export class LeaseLostError extends ConflictError {}
/** 409 `wrong_state`: the job has no delivery to settle, or is in a state the operation refuses. */
export class WrongStateError extends ConflictError {}
/** 409 `already_exists`: a job with that id exists. */
export class AlreadyExistsError extends ConflictError {}
/** 409 `partitions_in_use`: a topic's partition count can change only while the topic holds no job. */
export class PartitionsInUseError extends ConflictError {}
/** 503: the server cannot serve this now; the same call may succeed later (a push is idempotent). */
export class ServiceUnavailableError extends ApiError {
  override get retryable(): boolean {
    return true;
  }
}
/** 503 `unavailable`: the server's store (Redis, the data directory) is unavailable. */
export class UnavailableError extends ServiceUnavailableError {}
/** 503 `engine_full`: the store is full (Redis at its maxmemory, a full disk); nothing was written: retry once space is freed. */
export class EngineFullError extends ServiceUnavailableError {}
/** 503 `not_replicated`: the write was applied but too few Redis replicas acknowledged it in time. */
export class NotReplicatedError extends ServiceUnavailableError {}
/** 503 `timeout`: the request took longer than the server's request timeout. */
export class ServerTimeoutError extends ServiceUnavailableError {}
/** 503 `overloaded`: the server has too many requests (or long-polls) open. */
export class OverloadedError extends ServiceUnavailableError {}
/** 500 `internal`: a server bug; its log has the details. */
export class InternalError extends ApiError {}

/** The class of each error code the API documents, the table the `openapi` test holds to the document. */
export const ERROR_CLASSES = {
  invalid_topic: InvalidTopicError,
  invalid_id: InvalidIdError,
  invalid_delay: InvalidDelayError,
  invalid_ttr: InvalidTtrError,
  invalid_receipt: InvalidReceiptError,
  invalid_argument: InvalidArgumentError,
  invalid_request: InvalidRequestError,
  body_too_large: BodyTooLargeError,
  unauthorized: UnauthorizedError,
  read_only: ReadOnlyError,
  not_found: NotFoundError,
  method_not_allowed: MethodNotAllowedError,
  lease_lost: LeaseLostError,
  wrong_state: WrongStateError,
  already_exists: AlreadyExistsError,
  partitions_in_use: PartitionsInUseError,
  unavailable: UnavailableError,
  engine_full: EngineFullError,
  not_replicated: NotReplicatedError,
  timeout: ServerTimeoutError,
  overloaded: OverloadedError,
  internal: InternalError,
} as const satisfies Record<string, new (status: number, detail: ErrorDetail) => ApiError>;

/** An error code the API documents. */
export type ErrorCode = keyof typeof ERROR_CLASSES;

/** The HTTP status of each error code, for the errors the server reports per item (a settlement, an ack of a batch). */
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

/**
 * The typed error for `detail`, answered with `status` (for an error about one item of a
 * request, the code's usual status); an unknown code gives a plain {@link ApiError}.
 */
export function apiError(detail: ErrorDetail, status?: number, answer?: unknown): ApiError {
  if (!Object.hasOwn(ERROR_CLASSES, detail.code)) {
    return new ApiError(status ?? 0, detail, answer);
  }
  const code = detail.code as ErrorCode;
  return new ERROR_CLASSES[code](status ?? STATUS[code], detail, answer);
}

/** `unreachable`: no answer from the server (refused, reset, DNS, TLS); the call may or may not have been applied. */
export class ConnectionError extends DelayqError {
  constructor(message: string, options?: ErrorOptions) {
    super("unreachable", message, options);
  }

  override get retryable(): boolean {
    return true;
  }
}

/** `request_timeout`: the server did not answer within the client's timeout; the call may or may not have been applied. */
export class RequestTimeoutError extends DelayqError {
  constructor(message: string) {
    super("request_timeout", message);
  }

  override get retryable(): boolean {
    return true;
  }
}

/** `bad_response`: an answer that is not delayq's (a proxy's error page, a truncated body). */
export class ResponseError extends DelayqError {
  /** The HTTP status of the answer. */
  readonly status: number;

  constructor(status: number, message: string) {
    super("bad_response", message);
    this.status = status;
  }

  override get retryable(): boolean {
    return this.status >= 500;
  }
}

/** True when `e` says the delivery it was about is over for its holder: lost, gone, or never leased. */
export function endsDelivery(e: unknown): e is LeaseLostError | NotFoundError | WrongStateError {
  return e instanceof LeaseLostError || e instanceof NotFoundError || e instanceof WrongStateError;
}
