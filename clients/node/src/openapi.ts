// Generated from delayq's /v1/openapi.json by tools/openapi-gen.ts: do not edit.
// `npm run generate` writes it again from a server it starts; the openapi test fails when
// this file differs from what the server's document gives. It is long because it holds one
// type for every schema of the document.

/** Up to 1000 acks in one request: the deliveries' `receipts`, or their `leases`. */
export interface AckBatchRequest {
  /** The leases to ack, by topic, id and token (1 to 1000; not with `receipts`). */
  leases?: LeaseRef[];
  /** The receipts of the deliveries to ack (1 to 1000; not with `leases`). */
  receipts?: string[];
}

/** The answers to a batch ack, in order. */
export interface AckBatchResponse {
  /** One per receipt or lease. */
  results: AckResult[];
}

/** The answer to one ack of a batch. */
export interface AckResult {
  /**
   * Why not: `lease_lost`, `not_found` or `wrong_state`, as the per-job lease operations
   * answer.
   */
  error?: ErrorDetail | null;
  /** True when acked. */
  ok: boolean;
}

/** An archive: why the job goes dead. */
export interface ArchiveRequest {
  /** Why (at most 4 KiB), kept with the job as its last error. */
  reason?: string | null;
}

/**
 * A retry back-off: the delay after n failures is `min(max_ms, base_ms · factor^(n−1))`,
 * reduced by up to `jitter` of itself.
 */
export interface BackoffDto {
  /** The first delay in ms. */
  base_ms: number;
  /** The growth factor (exponential only; default 2; 1 to 100). */
  factor?: number | null;
  /** The jitter: a fraction from 0 to 1 (default 0). */
  jitter?: number | null;
  /** `fixed` or `exponential`. */
  kind: BackoffKind;
  /** The cap in ms (exponential only; default 1 h; at least `base_ms`). */
  max_ms?: number | null;
}

/** The shape of a retry back-off. */
export type BackoffKind = "fixed" | "exponential";

/** What a bulk request does to each job. */
export type BulkAction = "kick" | "delete" | "run_now" | "bury";

/** One job a bulk request could not act on. */
export interface BulkFailure {
  /** The error code, as a single request would answer it (`not_found`, `wrong_state` ...). */
  code: string;
  /** The job id. */
  id: string;
  /** What happened. */
  message: string;
}

/**
 * One action on many jobs of a topic: the jobs listed in `ids`, or every job of `state`
 * whose id starts with `prefix` (all of them without one), from `cursor` on.
 */
export interface BulkRequest {
  /** What to do to each job. */
  action: BulkAction;
  /** With `state`: the `next_cursor` of the previous answer, to go on where it stopped. */
  cursor?: string | null;
  /** These jobs (1 to 10,000 ids); or give `state`. */
  ids?: string[] | null;
  /** With `state`: only the jobs whose id starts with this. */
  prefix?: string | null;
  /** With `bury`: why (at most 4 KiB), kept with each job. */
  reason?: string | null;
  /** Every job of this state (with `prefix`, those whose id starts with it); or give `ids`. */
  state?: StateDto | null;
}

/** What a bulk request did. */
export interface BulkResponse {
  /** Jobs acted on. */
  done: number;
  /** Jobs the action did not apply to (gone meanwhile, in another state ...). */
  failed: number;
  /** The first failures (at most 10). */
  failures: BulkFailure[];
  /** By `state`: more jobs remain to look at; send the request again with `cursor`. */
  more: boolean;
  /** By `state`, when `more`: pass as `cursor` to go on. */
  next_cursor?: string | null;
  /** Jobs looked at: the ids given, or the jobs of the state walked (at most 10,000). */
  scanned: number;
}

/** A bury. */
export interface BuryRequest {
  /** Why (at most 4 KiB, no NUL character), kept with the job. */
  reason?: string | null;
  /** The delivery's receipt, instead of `token`. */
  receipt?: string | null;
  /** The lease token from the reserve; or give `receipt`. */
  token?: number | null;
}

/** A count of jobs an operation touched. */
export interface CountResponse {
  /** How many. */
  count: number;
}

/**
 * A job handed to a reserver. Each fact is in one place: the attempt number is
 * `job.attempts`, the lease deadline `job.deadline` (and `job.deadline_ms`).
 */
export interface DeliveryDto {
  /** The job, reserved: `attempts` counts this delivery, `deadline` is the lease's. */
  job: JobDto;
  /** How late the delivery is in ms, to the µs (engine time at reserve minus the due time). */
  lateness_ms: number;
  /**
   * The one string that names this delivery's lease in every lease operation (a batch
   * ack's `receipts`, `receipt` in ack, nack, touch, bury and release, a reserve's
   * `settle`); absent in at-most-once mode. Opaque: pass it back unchanged.
   */
  receipt?: string | null;
  /**
   * The fencing token of this delivery's lease, for the `topic`, `id` and `token` forms
   * of the lease operations; absent in at-most-once mode.
   */
  token?: number | null;
}

/**
 * Where a topic's due jobs go: a webhook (`url`, `secrets`, `headers`, `content_type`), a
 * RabbitMQ exchange (`url`, `exchange`, `routing_key`, `content_type`) or a NATS JetStream
 * subject (`url`, `subject`).
 *
 * To a webhook, each due job is sent as a `POST` of its body with the headers `webhook-id` (the same for
 * every attempt of one job), `webhook-timestamp`, `webhook-signature` (Standard Webhooks:
 * `v1,<base64 HMAC-SHA256 of id.timestamp.body>`, one per secret), `delayq-topic`,
 * `delayq-job-id`, `delayq-attempt` and `delayq-due-at` (Unix ms). A `2xx` answer acks
 * the job; a `429` or `503` with `Retry-After` is waited out and sent again within the
 * same attempt while the lease allows (at most 5 times, waits adding up to at most half the
 * ttr), else the job is retried after it; other `429` and `5xx` answers retry it with its
 * back-off (or after `Retry-After`); any other status sends it to dead with the status and
 * the start of the answer as the reason. A send may take the job's ttr, or `timeout_ms`
 * when that is shorter.
 *
 * Putting a destination fills the topic's unset `max_attempts` and `backoff` with the
 * receiver schedule (10 attempts; 5 s growing fourfold up to 10 h, 10 % jitter: about 27
 * hours in all), so that a receiver down for a while does not send jobs to dead; settings
 * the topic has are kept. `GET /v1/topics/{topic}` shows them.
 *
 * To RabbitMQ, each due job is published (persistent, mandatory) to `exchange` with
 * `routing_key`, `message_id` the same for every attempt, and the headers `delayq-topic`,
 * `delayq-job-id`, `delayq-attempt` and `delayq-due-at`; it is acked once the broker
 * confirmed it. A message returned unroutable (no queue bound), a `nack`, a missing
 * exchange or a broker down retry it with its back-off.
 *
 * To NATS, each due job is published to `subject` with the headers `Nats-Msg-Id` (the same
 * for every attempt: JetStream drops a repeat), `delayq-topic`, `delayq-job-id`,
 * `delayq-attempt` and `delayq-due-at`, and acked once JetStream's `PubAck` came; a stream
 * must take the subject.
 */
export interface DestinationDoc {
  /**
   * Webhook: the requests' `content-type` (default `application/octet-stream`);
   * RabbitMQ: the messages' `content_type` property (none unless set).
   */
  content_type?: string | null;
  /**
   * RabbitMQ: the exchange (default: the default exchange, which routes to the queue
   * named by `routing_key`).
   */
  exchange?: string | null;
  /**
   * Webhook: extra headers (at most 32), e.g. `authorization`; the values of those that
   * carry credentials (a name containing `auth`, `cookie`, `token`, `secret`, `key`,
   * `pass`, `credential`, `session` or `signature`) are never returned.
   */
  headers?: Record<string, string> | null;
  /** The most sends in flight from one server (1 to 1,000; default 16). */
  max_concurrency?: number | null;
  /** RabbitMQ: the routing key (required; a queue's name for the default exchange). */
  routing_key?: string | null;
  /**
   * Webhook: the signing secrets (1 to 10, required): `whsec_` and the standard base64
   * (padded or not) of 24 to 64 random bytes. Each request carries one signature per secret; rotate by adding the
   * new secret, moving the receiver to it, then removing the old one. Never returned.
   */
  secrets?: string[] | null;
  /** NATS: the subject to publish to (required; no wildcards). */
  subject?: string | null;
  /**
   * How long one send may wait for its answer, in ms (10 ms to 24 h); unset: until the
   * job's lease ends (its ttr, less 2 % of it), which also bounds a longer one. A send cut
   * short is a `timeout`, retried with the job's back-off.
   */
  timeout_ms?: number | null;
  /** The kind: `webhook`, `rabbitmq` or `nats`. */
  type: DestinationType;
  /**
   * A webhook's `http://` or `https://` URL; a RabbitMQ broker's `amqp://` or `amqps://`
   * URL (`amqp://user:password@host:5672/%2f`); a NATS server's `nats://` or `tls://` URL.
   */
  url: string;
}

/** The kinds of destination. */
export type DestinationType = "webhook" | "rabbitmq" | "nats";

/**
 * A destination as `GET` shows it: no secrets, the values of headers that carry
 * credentials masked, a password in the URL masked.
 */
export interface DestinationView {
  /** Webhook: the requests' `content-type`; RabbitMQ: the messages' `content_type`. */
  content_type?: string | null;
  /** RabbitMQ: the exchange (empty: the default exchange). */
  exchange?: string | null;
  /**
   * Webhook: the extra headers, the value of each that carries credentials (a name
   * containing `auth`, `cookie`, `token`, `secret`, `key`, `pass`, `credential`,
   * `session` or `signature`) shown as `***`.
   */
  headers?: Record<string, string> | null;
  /** The most sends in flight from one server. */
  max_concurrency: number;
  /** RabbitMQ: the routing key. */
  routing_key?: string | null;
  /** Webhook: how many signing secrets it has. */
  secret_count?: number | null;
  /** NATS: the subject. */
  subject?: string | null;
  /** How long one send may wait for its answer, in ms; null: until the job's lease ends. */
  timeout_ms?: number | null;
  /** The kind: `webhook`, `rabbitmq` or `nats`. */
  type: DestinationType;
  /** The URL (a password in it as `***`). */
  url: string;
}

/** How a body is written in JSON. */
export type Encoding = "utf8" | "base64";

/** The JSON body of every error response. */
export interface ErrorBody {
  /** The error. */
  error: ErrorDetail;
}

/**
 * One error: a stable machine-readable code and a message for people; for a bad field of
 * the request, which field and (inside a list) which item.
 */
export interface ErrorDetail {
  /**
   * Stable code: `invalid_topic`, `invalid_id`, `invalid_delay`, `invalid_ttr`,
   * `invalid_receipt`, `invalid_argument`, `invalid_request`, `body_too_large`,
   * `unauthorized`, `read_only`, `not_found`, `lease_lost`, `already_exists`, `wrong_state`,
   * `partitions_in_use`, `unavailable`, `engine_full`, `not_replicated`, `timeout`,
   * `overloaded`, `method_not_allowed`, `internal`.
   */
  code: string;
  /**
   * The JSON pointer (RFC 6901) of the request field at fault, e.g. `/jobs/1/delay_ms`;
   * absent when the error is not about one field of the request body.
   */
  field?: string | null;
  /**
   * The index of the list item at fault (a job of a batch push, a lease or receipt of a
   * batch ack, an item of a reserve's `settle` or `topics`); absent when the error is not
   * about one item.
   */
  index?: number | null;
  /** What went wrong and what to do; starts with the field's JSON pointer when there is one. */
  message: string;
}

/** A stored job. */
export interface JobDto {
  /**
   * Deliveries so far; in a delivery, the attempt number of that delivery (1 for the
   * first).
   */
  attempts: number;
  /** The retry back-off. */
  backoff: BackoffDto;
  /** The payload, as `encoding` says. */
  body: string;
  /** When it was pushed, RFC 3339. */
  created_at: string;
  /**
   * The lease deadline while reserved, the time of death while dead, the time of the ack
   * while done (RFC 3339); absent otherwise.
   */
  deadline?: string | null;
  /** `deadline` in ms since the Unix epoch. */
  deadline_ms?: number | null;
  /** `utf8` when the body is valid UTF-8, else `base64`. */
  encoding: Encoding;
  /** The latest it may be delivered, RFC 3339; absent when it has no expiry. */
  expires_at?: string | null;
  /** `expires_at` in ms since the Unix epoch. */
  expires_at_ms?: number | null;
  /** The id. */
  id: string;
  /**
   * The reason given by the last nack or bury, "lease expired", or "expired" (its expiry
   * passed before a delivery); absent when none.
   */
  last_error?: string | null;
  /** Deliveries allowed before it goes dead. */
  max_attempts: number;
  /** What happens when `expires_at` passes before a delivery; absent without an expiry. */
  on_expire?: OnExpireDto | null;
  /** Among due jobs, lower runs first. */
  priority: number;
  /** The due time, RFC 3339. */
  ready_at: string;
  /** The due time in ms since the Unix epoch. */
  ready_at_ms: number;
  /** The state. */
  state: StateDto;
  /** The topic. */
  topic: string;
  /** The lease length in ms. */
  ttr_ms: number;
}

/** The lateness histogram and its percentiles, over the last minute and the last hour. */
export interface LatenessDto {
  /**
   * The histogram's bucket bounds in ms, smallest first: bucket `i` counts lateness up to
   * `bounds_ms[i]` (above the one before); one more bucket counts what is above the last.
   * The same bounds as `/metrics`' `delayq_lateness_seconds`.
   */
  bounds_ms: number[];
  /** The minutes of `minutes`. */
  last_hour: LatenessWindow;
  /** The last 60 seconds. */
  last_minute: LatenessWindow;
}

/** The lateness of the deliveries of a window of time. */
export interface LatenessWindow {
  /** Deliveries. */
  count: number;
  /** Deliveries per bucket: one count per bound of `bounds_ms`, then the count above it. */
  counts: number[];
  /** The largest lateness in ms; null without deliveries. */
  max_ms?: number | null;
  /**
   * Median lateness in ms, estimated from the histogram (linear within a bucket, never
   * above `max_ms`); null without deliveries.
   */
  p50_ms?: number | null;
  /** 90th percentile, as `p50_ms`. */
  p90_ms?: number | null;
  /** 99th percentile, as `p50_ms`. */
  p99_ms?: number | null;
}

/** One lease in a batch ack. */
export interface LeaseRef {
  /** The job id. */
  id: string;
  /** The lease token. */
  token: number;
  /** The topic. */
  topic: string;
}

/** One page of a listing. */
export interface ListResponse {
  /** The jobs, in the state's order. */
  jobs: JobDto[];
  /** Pass as `cursor` to get the next page; absent on the last page. */
  next_cursor?: string | null;
  /** With a `prefix`: how many jobs the server looked at for this page (at most 10,000). */
  scanned?: number | null;
}

/** One minute of what this server did. */
export interface MinuteDto {
  /** Deliveries acked through this server. */
  acked: number;
  /**
   * Jobs this server sent to dead: buried, or nacked on their last attempt (a lease that
   * runs out on the last attempt is not seen by any server).
   */
  dead: number;
  /** Deliveries handed out by this server's reserves. */
  delivered: number;
  /** Jobs created by pushes through this server. */
  pushed: number;
  /** When the minute began, RFC 3339. */
  start: string;
  /** `start` in ms since the Unix epoch. */
  start_ms: number;
}

/** What to do with fire times that passed while no server ran. */
export type MisfireDto = "skip" | "once" | "each";

/** A delivery mode. */
export type ModeDto = "at_least_once" | "at_most_once";

/** A nack. */
export interface NackRequest {
  /** Retry after this many ms instead of the job's back-off (0 to 10 years). */
  delay_ms?: number | null;
  /** Why it failed (at most 4 KiB, no NUL character), kept with the job. */
  reason?: string | null;
  /** The delivery's receipt, instead of `token`. */
  receipt?: string | null;
  /** The lease token from the reserve; or give `receipt`. */
  token?: number | null;
}

/** What a nack did. */
export interface NackResponse {
  /** `retry` or `dead`. */
  outcome: string;
  /** When it will be delivered again (RFC 3339), for `retry`. */
  ready_at?: string | null;
}

/** What a push does when a live job with its id exists. */
export type OnConflictDto = "keep" | "replace" | "debounce";

/** What happens to a job whose expiry passed before a delivery. */
export type OnExpireDto = "dead" | "drop";

/** What was done with a delivery, reported in a reserve's `settle`. */
export type OutcomeDto = "ack" | "nack" | "bury" | "release";

/**
 * How long to pause a topic: at most one of `until` and `for_ms`; neither pauses it until
 * resumed.
 */
export interface PauseRequest {
  /** The pause ends this many ms from now (at most 10 years). */
  for_ms?: number | null;
  /** The pause ends at this RFC 3339 time (at most 10 years ahead). */
  until?: string | null;
}

/** A topic's pause. */
export interface PauseResponse {
  /**
   * Whether the server knew the topic before this pause: it had jobs, settings or a
   * pause. False for a name never used (or purged since): the pause holds, ahead of the
   * topic's first push, and lists the topic in `/v1/topics`; check the name if it was
   * meant to be an existing topic.
   */
  known: boolean;
  /** True while the topic is paused. */
  paused: boolean;
  /** When the pause ends, RFC 3339; null when paused until resumed. */
  paused_until?: string | null;
}

/**
 * The answer to a batch push that failed: the error, and when some jobs were stored and
 * others not (on a Redis Cluster whose primary holding some of the topic's partitions is
 * down), what became of each job. `error` is the first job's not stored, `index` naming it.
 */
export interface PushBatchFailed {
  /** The error. */
  error: ErrorDetail;
  /**
   * Only when some jobs were stored: every job's id, in order, generated ones included.
   * Send the jobs whose result is `null` again with these ids: a push is idempotent by
   * its id, so none is stored twice.
   */
  ids?: string[] | null;
  /**
   * Only when some jobs were stored: one per job, in order, the push's answer for a job
   * stored, `null` for one that was not (which may still be stored: its call may run
   * late).
   */
  results?: Array<PushResponse | null> | null;
}

/** Up to 1000 jobs of one topic. */
export interface PushBatchRequest {
  /** The jobs, answered in order. */
  jobs: PushRequest[];
}

/** The answers to a batch push, in order. */
export interface PushBatchResponse {
  /** One answer per job. */
  results: PushResponse[];
}

/** A job to push. */
export interface PushRequest {
  /** The retry back-off (default: exponential from 1 s, doubling, up to 1 h, 10 % jitter). */
  backoff?: BackoffDto | null;
  /** The payload, as `encoding` says. */
  body: string;
  /**
   * Due this many ms after the server receives the push (0 to 10 years). At most one of
   * `delay_ms` and `ready_at`; neither means due now.
   */
  delay_ms?: number | null;
  /** `utf8` (default) or `base64`. */
  encoding?: Encoding;
  /**
   * Not delivered after this RFC 3339 time on the engine's clock, which must be after its
   * due time: a job still waiting then goes dead with the reason `expired` (or is
   * dropped, `on_expire`). At most one of `expires_at` and `max_lateness_ms`; a delivery
   * made in time runs to its end.
   */
  expires_at?: string | null;
  /**
   * The job id, also the idempotency key (1 to 200 visible ASCII characters); a UUIDv7 is
   * generated when absent.
   */
  id?: string | null;
  /** Deliveries before the job goes dead (1 to 10,000, default 3). */
  max_attempts?: number | null;
  /**
   * Not delivered more than this many ms after its due time (1 ms to 10 years), counted
   * once at the push: retries do not move it.
   */
  max_lateness_ms?: number | null;
  /** With `debounce`: the latest the job may become due, in ms after its first push. */
  max_wait_ms?: number | null;
  /**
   * When a live job with this id exists: `keep` it (default), `replace` a waiting one's
   * body, due time and options, or `debounce` (replace, with each push's delay moving it
   * back, bounded by `max_wait_ms` from its first push). A reserved or dead job is never
   * touched.
   */
  on_conflict?: OnConflictDto;
  /**
   * With an expiry: `dead` (default) sends the expired job to dead with the reason
   * `expired`, `drop` deletes it.
   */
  on_expire?: OnExpireDto | null;
  /** Among due jobs, lower runs first (default 0). */
  priority?: number | null;
  /**
   * Due at this RFC 3339 time (`2026-01-02T15:04:05.000+00:00`, or with `Z`), on the
   * engine's clock (at most 10 years ahead; a time in the past means now).
   */
  ready_at?: string | null;
  /** The lease length of each delivery in ms (1 s to 24 h, default 30 s). */
  ttr_ms?: number | null;
}

/** The answer to a push. */
export interface PushResponse {
  /**
   * True when this push created the job; false when a live job with this id existed (then
   * nothing changed).
   */
  created: boolean;
  /** The job id (generated or given). */
  id: string;
  /** The due time, RFC 3339. */
  ready_at: string;
  /** The due time in ms since the Unix epoch. */
  ready_at_ms: number;
  /**
   * True when a live job with this id existed and this push replaced it (`on_conflict`
   * `replace` or `debounce` of a waiting job).
   */
  replaced: boolean;
  /** The job's state. */
  state: StateDto;
}

/** A due time. */
export interface ReadyAtResponse {
  /** RFC 3339. */
  ready_at: string;
  /** In ms since the Unix epoch. */
  ready_at_ms: number;
}

/** A new due time: `{"delay_ms": n}` or `{"ready_at": "<RFC 3339>"}` (exactly one). */
export interface RescheduleRequest {
  /** Due this many ms from now (0 to 10 years). */
  delay_ms?: number | null;
  /** Due at this RFC 3339 time, at most 10 years ahead; a past time means now. */
  ready_at?: string | null;
}

/** A reserve (long-poll). */
export interface ReserveRequest {
  /** The most jobs to return (1 to 1000, default 1; 0 with `settle`: settle only, no wait). */
  max?: number | null;
  /** `at_least_once` (default) or `at_most_once`. */
  mode?: ModeDto;
  /**
   * Leases to settle before reserving (up to 1000), so that a consumer's cycle (report
   * what it finished, take the next jobs) is one request. Each is answered in `settled`,
   * in order; a lost lease is answered there and never fails the request.
   */
  settle?: SettleItem[];
  /** Topics to take from (1 to 64, no repeats). */
  topics: string[];
  /**
   * How long to wait for a first job, in ms (default 0). A longer wait than the server's
   * long-poll limit (30 s unless configured) is cut to it: the answer's `wait_ms` says the
   * wait used. The answer comes as soon as a job is due.
   */
  wait_ms?: number | null;
}

/** The jobs of a reserve; empty when none came within the wait. */
export interface ReserveResponse {
  /** The deliveries. */
  jobs: DeliveryDto[];
  /** One answer per item of the request's `settle`, in order (empty without it). */
  settled: SettleResult[];
  /**
   * The asked topics the engine could not reach as it answered, in the order asked;
   * empty when it reached them all. On a Redis Cluster, a reserve over topics of several
   * primaries answers with the jobs of the primaries that answered and skips, for a
   * second or so, one that did not answer within the slot timeout (500 ms): its topics
   * are listed here (a partitioned topic when any of its partitions is on it). Their
   * jobs are not lost: they are served again once the primary answers, or its replica
   * took over. Elsewhere (one Redis node, the embedded engine, PostgreSQL) always empty:
   * a failure fails the whole request.
   */
  unreachable: string[];
  /**
   * The longest this reserve waited for a first job, in ms: the request's `wait_ms` cut to
   * the server's long-poll limit (0 when `max` is 0). Loop with it as the wait.
   */
  wait_ms: number;
}

/**
 * How many acked jobs a topic keeps, and for how long: a done job stays until `max_age_ms`
 * after its ack, or until `max_jobs` later ones were acked, whichever comes first.
 */
export interface RetentionDto {
  /** How long after its ack a done job is kept, in ms (1 s to 30 days). */
  max_age_ms: number;
  /** The most done jobs kept (1 to 100,000); the oldest go first. */
  max_jobs: number;
}

/** A stored schedule, with its state. */
export interface ScheduleDto {
  /** The jobs' retry back-off; absent: the topic's. */
  backoff?: BackoffDto | null;
  /** The jobs' payload, as `encoding` says. */
  body: string;
  /** The cron expression. */
  cron: string;
  /** `utf8` when the payload is valid UTF-8, else `base64`. */
  encoding: Encoding;
  /** No fire after this time (RFC 3339). */
  end?: string | null;
  /** The jobs' `expires_at` (RFC 3339); absent: none. */
  expires_at?: string | null;
  /** The jitter in ms. */
  jitter_ms: number;
  /** The jobs' deliveries before dead; absent: the topic's. */
  max_attempts?: number | null;
  /** The jobs' `max_lateness_ms`; absent: none. */
  max_lateness_ms?: number | null;
  /** The misfire policy. */
  misfire: MisfireDto;
  /** With `each`, the most missed fires pushed. */
  misfire_limit?: number | null;
  /** The name. */
  name: string;
  /** The next fire time (RFC 3339); absent when the schedule has ended. */
  next_fire?: string | null;
  /** `next_fire` in ms since the Unix epoch. */
  next_fire_ms?: number | null;
  /** What happens to an expired job; absent without an expiry. */
  on_expire?: OnExpireDto | null;
  /** The jobs' priority. */
  priority: number;
  /** The latest fire time whose job was pushed (RFC 3339); absent before the first. */
  pushed_through?: string | null;
  /** 1 when created, + 1 at each replacement. */
  revision: number;
  /** No fire before this time (RFC 3339). */
  start?: string | null;
  /** The time zone. */
  time_zone: string;
  /** The topic. */
  topic: string;
  /** The jobs' lease length in ms; absent: the topic's. */
  ttr_ms?: number | null;
}

/**
 * A schedule: a cron expression in a time zone, and the job each fire pushes.
 *
 * Each fire pushes one job whose id is `schedule:<name>:<fire time in ms>` (so several
 * servers push one job per fire), due at the fire time (plus a jitter below `jitter_ms`).
 * Daylight-saving changes follow Vixie cron: a fire in the skipped hour fires when the
 * clock jumps; a fixed time in the repeated hour fires once.
 */
export interface ScheduleRequest {
  /** The jobs' retry back-off (default: the topic's). */
  backoff?: BackoffDto | null;
  /** The jobs' payload, as `encoding` says. */
  body?: string;
  /**
   * Five fields (minute hour day-of-month month day-of-week), six with seconds first, or
   * a nickname: `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@hourly`. A
   * seventh field (the year) is refused: bound the schedule with `start` and `end`.
   */
  cron: string;
  /** `utf8` (default) or `base64`. */
  encoding?: Encoding;
  /** No fire after this RFC 3339 time. */
  end?: string | null;
  /**
   * No job is delivered after this RFC 3339 time, as a push's `expires_at` (one time for
   * every job), and no fire whose job would be due at or after it is pushed.
   */
  expires_at?: string | null;
  /** Each job is due up to this many ms after its fire time (0 to 3,600,000; default 0). */
  jitter_ms?: number | null;
  /** The jobs' deliveries before dead (default: the topic's). */
  max_attempts?: number | null;
  /**
   * Each job is not delivered more than this many ms after its due time (1 ms to 10
   * years), as a push's `max_lateness_ms`: its fire time plus jitter, or the time a missed
   * fire is pushed. At most one of this and `expires_at`.
   */
  max_lateness_ms?: number | null;
  /**
   * What to do with fires missed while no server ran (default `skip`). The fire after
   * the one pushed last is late, not missed, and pushed whatever this says, when found
   * less than 60 s (or the schedule's interval, when shorter) after its time. The fire
   * pushed ahead before an outage is delivered after it, late, whatever this says (give
   * `max_lateness_ms` to have it expire instead).
   */
  misfire?: MisfireDto;
  /** With `misfire: each`, the most missed fires pushed (1 to 1000; default 10). */
  misfire_limit?: number | null;
  /**
   * With `max_lateness_ms` or `expires_at`: `dead` (default) sends an expired job to dead
   * with the reason `expired`, `drop` deletes it.
   */
  on_expire?: OnExpireDto | null;
  /** The jobs' priority (default 0). */
  priority?: number | null;
  /** No fire before this RFC 3339 time. */
  start?: string | null;
  /** An IANA time zone (`Europe/Berlin`); default `UTC`. */
  time_zone?: string | null;
  /** The topic the jobs go to. */
  topic: string;
  /** The jobs' lease length in ms (default: the topic's). */
  ttr_ms?: number | null;
}

/** Every schedule. */
export interface SchedulesResponse {
  /** The schedules, by name. */
  schedules: ScheduleDto[];
}

/**
 * What this server did, per minute over the last hour, and how late its deliveries were.
 *
 * Per server, since it started: the counts are this server's own (what it pushed, delivered
 * and settled through its API), kept in its memory; other servers of the same engine keep
 * their own, and a restart begins again at zero.
 */
export interface SeriesResponse {
  /** The deliveries' lateness (delivery time minus due time, on the engine's clock). */
  lateness: LatenessDto;
  /**
   * One per minute, oldest first: the last 60 minutes (fewer in the server's first hour);
   * the last is the minute in progress. Minutes count from the server's start.
   */
  minutes: MinuteDto[];
  /** Always `per server, since it started`. */
  scope: string;
  /** When this server started counting, RFC 3339 (this server's clock). */
  since: string;
  /** `since` in ms since the Unix epoch. */
  since_ms: number;
  /**
   * The topic asked for; null: every topic this server tracks (at most 256, the least
   * recently active dropped first), summed.
   */
  topic?: string | null;
}

/**
 * One lease to settle: which delivery (its `receipt`, or its `topic`, `id` and `token`),
 * and its outcome.
 */
export interface SettleItem {
  /** For `nack` only: retry after this many ms instead of the job's back-off. */
  delay_ms?: number | null;
  /** The job id (without `receipt`). */
  id?: string | null;
  /** `ack` (default), `nack`, `bury` or `release`. */
  outcome?: OutcomeDto;
  /** For `nack` and `bury` only: why (at most 4 KiB, no NUL character), kept with the job. */
  reason?: string | null;
  /** The delivery's receipt; or give `topic`, `id` and `token`. */
  receipt?: string | null;
  /** The lease token from the reserve (without `receipt`). */
  token?: number | null;
  /** The topic (without `receipt`). */
  topic?: string | null;
}

/** The answer to one settlement of a reserve. */
export interface SettleResult {
  /**
   * Why not: `lease_lost`, `not_found` or `wrong_state`, as the per-job lease operations
   * answer.
   */
  error?: ErrorDetail | null;
  /** True when the outcome was recorded. */
  ok: boolean;
  /** For a recorded nack: `retry` or `dead`. */
  outcome?: string | null;
  /** For a nack answered `retry`: when it will be delivered again (RFC 3339). */
  ready_at?: string | null;
}

/** A job state. */
export type StateDto = "delayed" | "ready" | "reserved" | "dead" | "done";

/** Counts and health of a topic. */
export interface StatsDto {
  /** Dead jobs. */
  dead: number;
  /** Jobs waiting for their due time. */
  delayed: number;
  /** Done jobs the topic's retention keeps (0 without one). */
  done: number;
  /**
   * Jobs whose expiry passed before a delivery (gone dead with the reason `expired`, or
   * dropped), since the topic was created or last purged.
   */
  expired_jobs: number;
  /** Leases that ran out without an answer, since the topic was created or last purged. */
  expired_leases: number;
  /** The earliest due time among delayed jobs, RFC 3339. */
  next_due?: string | null;
  /** How long the longest-waiting due job has waited, in ms. */
  oldest_overdue_ms?: number | null;
  /** True while the topic is paused: it hands out no job (`POST .../pause`). */
  paused: boolean;
  /** When the pause ends, RFC 3339; null while not paused or paused until resumed. */
  paused_until?: string | null;
  /** Due jobs waiting for a reserver. */
  ready: number;
  /** Leased jobs. */
  reserved: number;
  /** The topic. */
  topic: string;
}

/** A lease token. */
export interface TokenRequest {
  /** The delivery's receipt, instead of `token`. */
  receipt?: string | null;
  /** The lease token from the reserve; or give `receipt`. */
  token?: number | null;
}

/**
 * A topic's settings, shared by every server of the engine: the defaults of the jobs
 * pushed to it without their own (a push's own fields win) and the largest body it takes.
 * A `PUT` replaces them whole: an absent or null field is unset (the built-in default, or
 * the server's limit). A purge keeps them; jobs keep what they were pushed with.
 */
export interface TopicConfigDto {
  /**
   * The retry back-off of jobs pushed without one; null: exponential from 1 s, doubling,
   * up to 1 h, 10 % jitter.
   */
  backoff?: BackoffDto | null;
  /** The deliveries allowed to jobs pushed without `max_attempts` (1 to 10,000); null: 3. */
  max_attempts?: number | null;
  /**
   * The largest body of this topic's jobs in bytes (1 to 536870912); the server's
   * `--max-body` stays in force when it is smaller. null: the server's.
   */
  max_body?: number | null;
  /**
   * How many partitions hold the topic's jobs (1 to 1024); null: 1. A job's partition
   * follows from its id. The order (priority, then due time, then push order) is
   * promised within a partition, across partitions it is best effort: keep 1 where
   * strict order matters. It can change only while the topic holds no job (else 409
   * `partitions_in_use`, nothing changed): a `PUT` that leaves it out asks for 1.
   */
  partitions?: number | null;
  /**
   * Keep acked jobs, in state `done` (listed with `state=done`, read by id), within these
   * bounds; null: an acked job is removed at once. A change applies at once: the done
   * jobs beyond the new bounds go (all of them when it is null).
   */
  retention?: RetentionDto | null;
  /** The lease length in ms of jobs pushed without `ttr_ms` (1 s to 24 h); null: 30 s. */
  ttr_ms?: number | null;
}

/** Every topic with its stats. */
export interface TopicsResponse {
  /** The topics, sorted, but for those in `unreachable`. */
  topics: StatsDto[];
  /**
   * The topics the engine cannot reach now, sorted (a Redis Cluster primary that did not
   * answer their stats within the slot timeout, or did not answer in time lately; see
   * `unreachable` in a reserve's answer): their stats are not waited for, and these
   * topics are not in `topics`. Empty when every topic was reached.
   */
  unreachable: string[];
}

/** A touch. */
export interface TouchRequest {
  /** The delivery's receipt, instead of `token`. */
  receipt?: string | null;
  /** The lease token from the reserve; or give `receipt`. */
  token?: number | null;
  /** The new lease length from now in ms (1 s to 24 h; default the job's ttr). */
  ttr_ms?: number | null;
}

/** The new lease deadline. */
export interface TouchResponse {
  /** RFC 3339. */
  deadline: string;
  /** In ms since the Unix epoch. */
  deadline_ms: number;
}

/** Every operation of the API by `"METHOD /path"`: its arguments and its answer. */
export interface Operations {
  /** Delete a schedule, and its fire pushed ahead if still delayed; jobs already due stay. */
  "DELETE /v1/schedules/{name}": {
    args: {
      path: {
        name: string;
      };
    };
    answer: ScheduleDto;
  };
  /** Remove every job of a topic, in every state, and take it off `/v1/topics` (the next push puts it back; a paused topic stays there until its pause ends). Its settings and its pause stay. A topic with no jobs, no settings and no pause answers 404. */
  "DELETE /v1/topics/{topic}": {
    args: {
      path: {
        topic: string;
      };
    };
    answer: CountResponse;
  };
  /** Remove a topic's destination: its jobs stay and wait for workers. */
  "DELETE /v1/topics/{topic}/destination": {
    args: {
      path: {
        topic: string;
      };
    };
    answer: undefined;
  };
  /** Delete (cancel) a job in any state; a reserved job's lease is lost. */
  "DELETE /v1/topics/{topic}/jobs/{id}": {
    args: {
      path: {
        topic: string;
        id: string;
      };
    };
    answer: undefined;
  };
  /** Every schedule, with its next fire time. */
  "GET /v1/schedules": {
    args: Record<string, never>;
    answer: SchedulesResponse;
  };
  /** One schedule, with its next fire time. */
  "GET /v1/schedules/{name}": {
    args: {
      path: {
        name: string;
      };
    };
    answer: ScheduleDto;
  };
  /** What this server did per minute over the last hour (pushed, delivered, acked, dead) and the lateness of its deliveries (percentiles and histogram, last minute and last hour). */
  "GET /v1/series": {
    args: {
      query?: {
        topic?: string;
      };
    };
    answer: SeriesResponse;
  };
  /** Every topic pushed to since it was created or last purged, and every paused topic (jobs or not), with its stats; the topics the engine cannot reach now (a Redis Cluster primary down or hung) by name alone, in `unreachable`. */
  "GET /v1/topics": {
    args: Record<string, never>;
    answer: TopicsResponse;
  };
  /** A topic's settings: the defaults of jobs pushed without their own, its body limit. */
  "GET /v1/topics/{topic}": {
    args: {
      path: {
        topic: string;
      };
    };
    answer: TopicConfigDto;
  };
  /** Read a topic's destination, without its secrets. */
  "GET /v1/topics/{topic}/destination": {
    args: {
      path: {
        topic: string;
      };
    };
    answer: DestinationView;
  };
  /** List the jobs of a topic in one state, page by page. */
  "GET /v1/topics/{topic}/jobs": {
    args: {
      path: {
        topic: string;
      };
      query: {
        state: StateDto;
        limit?: number;
        cursor?: string;
        prefix?: string;
      };
    };
    answer: ListResponse;
  };
  /** Read a job in any state. */
  "GET /v1/topics/{topic}/jobs/{id}": {
    args: {
      path: {
        topic: string;
        id: string;
      };
    };
    answer: JobDto;
  };
  /** Counts per state and the age of the oldest overdue job of one topic. */
  "GET /v1/topics/{topic}/stats": {
    args: {
      path: {
        topic: string;
      };
    };
    answer: StatsDto;
  };
  /** Ack up to 1000 deliveries in one request, by their receipts (or their leases); each is answered in order. */
  "POST /v1/ack": {
    args: {
      body: AckBatchRequest;
    };
    answer: AckBatchResponse;
  };
  /** Take up to `max` due jobs from one or more topics, waiting up to `wait_ms` for a first one; first settle the leases listed in `settle`. */
  "POST /v1/reserve": {
    args: {
      body: ReserveRequest;
    };
    answer: ReserveResponse;
  };
  /** Push up to 1000 jobs of one topic in one request; answered in order. */
  "POST /v1/topics/{topic}/batch": {
    args: {
      path: {
        topic: string;
      };
      body: PushBatchRequest;
    };
    answer: PushBatchResponse;
  };
  /** Act on many jobs: kick, delete, run now or bury the listed ones, or every one of a state that matches an id prefix. */
  "POST /v1/topics/{topic}/bulk": {
    args: {
      path: {
        topic: string;
      };
      body: BulkRequest;
    };
    answer: BulkResponse;
  };
  /** Push one job. */
  "POST /v1/topics/{topic}/jobs": {
    args: {
      path: {
        topic: string;
      };
      body: PushRequest;
    };
    answer: PushResponse;
  };
  /** Ack a delivery: the job is done and removed. */
  "POST /v1/topics/{topic}/jobs/{id}/ack": {
    args: {
      path: {
        topic: string;
        id: string;
      };
      body: TokenRequest;
    };
    answer: undefined;
  };
  /** Send a delayed or ready job to dead now, without a lease (an operator's bury). */
  "POST /v1/topics/{topic}/jobs/{id}/archive": {
    args: {
      path: {
        topic: string;
        id: string;
      };
      body: ArchiveRequest;
    };
    answer: undefined;
  };
  /** Send a reserved job to dead at once. */
  "POST /v1/topics/{topic}/jobs/{id}/bury": {
    args: {
      path: {
        topic: string;
        id: string;
      };
      body: BuryRequest;
    };
    answer: undefined;
  };
  /** Make a dead job ready now, with its attempts reset. */
  "POST /v1/topics/{topic}/jobs/{id}/kick": {
    args: {
      path: {
        topic: string;
        id: string;
      };
    };
    answer: undefined;
  };
  /** Report a failed delivery: retry after `delay_ms` or the job's back-off, or dead when the job has used all its attempts. */
  "POST /v1/topics/{topic}/jobs/{id}/nack": {
    args: {
      path: {
        topic: string;
        id: string;
      };
      body: NackRequest;
    };
    answer: NackResponse;
  };
  /** Give a delivery back without counting the attempt: the job is ready again at once. */
  "POST /v1/topics/{topic}/jobs/{id}/release": {
    args: {
      path: {
        topic: string;
        id: string;
      };
      body: TokenRequest;
    };
    answer: undefined;
  };
  /** Move a delayed or ready job to a new due time, keeping its id and attempts. */
  "POST /v1/topics/{topic}/jobs/{id}/reschedule": {
    args: {
      path: {
        topic: string;
        id: string;
      };
      body: RescheduleRequest;
    };
    answer: ReadyAtResponse;
  };
  /** Extend a lease to now + `ttr_ms` (or the job's ttr). */
  "POST /v1/topics/{topic}/jobs/{id}/touch": {
    args: {
      path: {
        topic: string;
        id: string;
      };
      body: TouchRequest;
    };
    answer: TouchResponse;
  };
  /** Kick every dead job of a topic. */
  "POST /v1/topics/{topic}/kick": {
    args: {
      path: {
        topic: string;
      };
    };
    answer: CountResponse;
  };
  /** Pause a topic, for every server: reserves get none of its jobs until the pause ends (`until`, or `for_ms` from now; neither: until resumed). Its jobs still fall due, and pushes, acks and the rest work as usual. Pausing a paused topic replaces its end. A paused topic is in `/v1/topics`, jobs or not; a topic the server did not know may be paused ahead of its first push, and the answer says so (`known: false`). */
  "POST /v1/topics/{topic}/pause": {
    args: {
      path: {
        topic: string;
      };
      body: PauseRequest;
    };
    answer: PauseResponse;
  };
  /** End a topic's pause at once; reserves waiting on it wake. Nothing happens when it is not paused. A topic with no jobs, no settings and no pause answers 404. */
  "POST /v1/topics/{topic}/resume": {
    args: {
      path: {
        topic: string;
      };
    };
    answer: undefined;
  };
  /** Create or replace a schedule, for every server; its next fire is pushed at once. */
  "PUT /v1/schedules/{name}": {
    args: {
      path: {
        name: string;
      };
      body: ScheduleRequest;
    };
    answer: ScheduleDto;
  };
  /** Replace a topic's settings whole, for every server of the engine. */
  "PUT /v1/topics/{topic}": {
    args: {
      path: {
        topic: string;
      };
      body: TopicConfigDto;
    };
    answer: TopicConfigDto;
  };
  /** Give a topic a destination (replacing the one it had), for every server of the engine. */
  "PUT /v1/topics/{topic}/destination": {
    args: {
      path: {
        topic: string;
      };
      body: DestinationDoc;
    };
    answer: DestinationView;
  };
}

/** Every `"METHOD /path"` of the API. */
export type Route = keyof Operations;
