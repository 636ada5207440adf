/**
 * delayq's client for Node.js: push jobs due later, read and manage them, and run a
 * {@link Worker} that handles them when they are due.
 *
 * ```ts
 * import { Client, Worker, PermanentError } from "delayq";
 *
 * const client = new Client({ url: "http://127.0.0.1:7070" });
 * await client.push("orders.cancel", JSON.stringify({ order: 42 }), { id: "order-42", delayMs: 30 * 60_000 });
 *
 * const worker = new Worker(["orders.cancel"], async (job) => {
 *   const { order } = job.json<{ order: number }>();
 *   console.log(`cancel order ${order} (attempt ${job.attempts})`);
 * }, { client, concurrency: 10 });
 * await worker.run(); // until SIGINT or SIGTERM
 * ```
 *
 * # Layout
 *
 * - `client.ts`: {@link Client}, one method per call of the HTTP API.
 * - `http.ts`: the transport: `fetch`, bearer token, timeouts, errors.
 * - `errors.ts`: {@link DelayqError} and one class per error code of the API.
 * - `types.ts`: the client's types (options, answers, {@link Settlement} ...).
 * - `job.ts`: {@link Job} and {@link Delivery}, and the answers made of them ({@link Reserved}, {@link Page}).
 * - `wire.ts`: the conversions from and to the API's wire types.
 * - `openapi.ts`: the API's wire types, generated from the server's `/v1/openapi.json`.
 * - `log.ts`: the worker's {@link Logger}.
 * - `worker/worker.ts`: {@link Worker}: the loop that reserves, settles and shuts down.
 * - `worker/options.ts`: {@link WorkerOptions}, their defaults and their check.
 * - `worker/wake.ts`: what the worker's loop sleeps on.
 * - `worker/handler.ts`: {@link Handler}, {@link PermanentError}, {@link RetryError}.
 * - `worker/window.ts`: how many jobs the worker holds.
 * - `worker/outbox.ts`: the settlements waiting for the next reserve.
 * - `worker/renewal.ts`: lease renewal of running handlers.
 * - `worker/report.ts`: {@link Report}, and the answers to settlements.
 *
 * @packageDocumentation
 */

export { Client, type DueTime, type ListOptions, type PauseFor, type ReserveOptions } from "./client.js";
export {
  AlreadyExistsError,
  ApiError,
  BodyTooLargeError,
  ConflictError,
  ConnectionError,
  DelayqError,
  ERROR_CLASSES,
  EngineFullError,
  InternalError,
  InvalidArgumentError,
  InvalidDelayError,
  InvalidIdError,
  InvalidInputError,
  InvalidReceiptError,
  InvalidRequestError,
  InvalidTopicError,
  InvalidTtrError,
  LeaseLostError,
  MethodNotAllowedError,
  NotFoundError,
  NotReplicatedError,
  OverloadedError,
  PartitionsInUseError,
  ReadOnlyError,
  RequestTimeoutError,
  ResponseError,
  ServerTimeoutError,
  ServiceUnavailableError,
  UnauthorizedError,
  UnavailableError,
  WrongStateError,
  type ErrorCode,
} from "./errors.js";
export { DEFAULT_TIMEOUT_MS, type CallOptions, type ClientOptions } from "./http.js";
export { consoleLogger, type LogFields, type LogLevel, type Logger } from "./log.js";
export { Delivery, Job, type Page, type Reserved } from "./job.js";
export type {
  Backoff,
  Body,
  JobState,
  LeaseRef,
  NackResult,
  NewJob,
  Pause,
  PushOptions,
  PushResult,
  Schedule,
  ScheduleSpec,
  Settled,
  Settlement,
  Stats,
  Time,
  TopicSettings,
} from "./types.js";
export { PermanentError, RetryError, ShutdownError, type Handler, type JobContext } from "./worker/handler.js";
export type { Report } from "./worker/report.js";
export type { WorkerOptions } from "./worker/options.js";
export { Worker } from "./worker/worker.js";
