//! The Redis engine of delayq: the [`delayq_core::Engine`] contract on Redis 7.0 or newer,
//! one node or a Redis Cluster, shared by any number of processes with no leader.
//!
//! This is the engine's own map: its layout, the invariants it keeps, its keys, its
//! functions, how it waits, what a failure does to a job, and what changes on a cluster.
//! ARCHITECTURE.md has the map of the whole project and follows one job through this engine.
//!
//! # Layout
//!
//! - `engine`: [`RedisEngine`], the [`delayq_core::Engine`] implementation: checks the
//!   caller's input (core's checks) and dispatches to `ops`, a few lines per method.
//! - `ops`: one module per group of operations (`push`, `reserve`, `lease` for ack, nack,
//!   release, touch and bury; `admin` for get, delete, reschedule, kick, bury without a lease,
//!   list, stats, purge and now; `topics`, `config`, `schedules`, `destinations`, `numbers`,
//!   `reach`), each owning its functions' arguments, reply decoding and what their statuses
//!   mean; `ops/mod.rs` turns each status into its error in one place. `settle_and_reserve`
//!   is one round trip: the settlements of the first topic reserved from go in its
//!   `reserve.lua` call, those of other topics in settle-only calls of the same pipeline;
//!   only a pass after a wake costs another.
//! - `conn`: the connection, one node (a `ConnectionManager`) or a cluster (redis-rs's
//!   `ClusterConnection`), behind one `Conn` with `call`, `pipeline`, `query` and `write`, so
//!   `ops` does not know which; the client (URL, TLS), connecting, and loading the functions
//!   library: at connect, after checking that the server is Redis 7.0 or newer (an older one
//!   fails the connect with `InvalidConfig` naming the version found) and not a cluster node
//!   reached by a plain `redis://` URL (`InvalidConfig`: use `redis+cluster://`; a database
//!   index the server lacks is one too), and again whenever a call answers "function not
//!   found" (a Redis restarted without persistence, a `FUNCTION FLUSH`, a failover); a
//!   pipeline then resends just the calls that came back so. `conn/cluster.rs`: the cluster
//!   URL, timeouts and retries, its two connections (the main one, and one that gives up
//!   after two retries for the calls that wait on one slot beside others), loading per
//!   primary, pipelines cut per slot. `conn/per_slot.rs`: calls over several slots answered
//!   slot by slot, each within the slot timeout, and the slots found unreachable lately
//!   (`ops/reach.rs` turns them into the topics `Engine::unreachable` names).
//!   `conn/shards.rs`: which slots share a primary (`CLUSTER SHARDS`). `conn/probe.rs`: the
//!   probe that keeps a skipped shard skipped until a key of its slot is answered.
//!   `conn/replicas.rs`: the wait-replicas option. `conn/readiness.rs`: `Engine::readiness`.
//! - `library` and `lua/*.lua`: one Redis Functions library, `delayq_<version>`, assembled
//!   at build time: `lua/lib.lua` (the shared helpers, created once per `FUNCTION LOAD`, not
//!   per call), then each `lua/<op>.lua` as the body of the function `delayq_<version>_<op>`
//!   (called with `FCALL`). Each file opens with its KEYS, ARGV, return values, status codes
//!   and invariants.
//! - `keys`: every key name, `<prefix>:{<topic>}:<name>`, built from one prefix, so one call
//!   touches one slot.
//! - `wait`: the waker task: per-topic local timers and one blocking `BZPOPMIN` on a dedicated
//!   connection, so waiting reservers neither poll nor miss a due time; `wait/slots.rs`: on a
//!   cluster, one such wait per hash slot with waiters.
//! - `clock`: the mapping from Redis `TIME` to the local monotonic clock.
//! - `codec`: status codes and job replies, mirrored from `lua/lib.lua`; a job comes as its
//!   id, state, lease token, deadline and its stored record, whose msgpack fields `codec`
//!   decodes (`rmp`), so Lua never decodes a record just to re-encode it as a reply.
//! - `error`: redis-rs errors onto [`delayq_core::Error`].
//! - `config`: [`RedisConfig`].
//!
//! # Invariants
//!
//! **Architecture Invariant:** the library's version is bumped whenever the stored format (key
//! layout, record fields) or a function's arguments or reply change. Function names carry the
//! version too (Redis wants them unique across libraries), so two delayq versions can share one
//! Redis during a rolling upgrade, each calling its own functions; they must not share a key
//! prefix when the stored format differs.
//!
//! **Architecture Invariant:** every state change is exactly one function call; no state change
//! spans two round trips, and no lock is held across round trips.
//!
//! **Architecture Invariant:** no producer or worker clock decides when a job is due. Functions
//! read `redis.call('TIME')`; no argument carries "now". (Functions replicate their effects, so
//! `TIME` before writes is allowed; checked on 7.0.15.)
//!
//! **Architecture Invariant:** every key a function touches is passed in `KEYS` and carries the
//! hash tag of one partition of one topic (the topic's own name for a topic of one partition);
//! no call touches two. A reserve over several topics or partitions calls once per partition.
//! This is what makes the engine Redis Cluster–safe.
//!
//! **Architecture Invariant:** functions check everything that can refuse a call before their
//! first write (a `redis.error_reply` after a write would not undo it).
//!
//! # The hot path
//!
//! **Batches cost calls per batch, not per job.** The functions on the hot path (push, the
//! promotion and lease expiry in `tick`, reserve, ack) read a whole batch with one `HMGET` and
//! write with one multi-member `ZADD`/`HSET`/`ZREM`/`HDEL` (in calls of at most 1000
//! arguments); reserve takes its jobs with one `ZRANGE` and one `ZREMRANGEBYRANK` and its lease
//! tokens with one `GET` and one `SET` of its counter; promotion and expiry remove their jobs with one `ZREMRANGEBYRANK`
//! (they are exactly the first ranks). Redis's time goes mostly into the function itself, so
//! fewer, larger calls are what the worker's batching buys. Inside a function, Lua strings and
//! tables are the cost to watch (each string Redis hands to Lua is hashed and interned): acks
//! arrive as runs of `ARGV` passed on with `unpack`, never as a table per ack; a settle-and-reserve
//! removes its acked jobs after leasing the next ones, so a worker's steady cycle keeps `leases`
//! near one size rather than emptying and refilling it.
//!
//! **The lease is not in the record.** A lease is the job's entry in `leases` (its deadline)
//! and its token field in `jobs` (`" <id>"`: a space, which no id contains, then the id); the
//! record counts the attempts that have *ended*, and a leased
//! job's current attempt is its lease. So a reserve writes no record (it adds two small entries
//! per job) and decodes none: it reads only each record's ttr (`cmsgpack.unpack_limit` up to
//! that field, never the body) and replies with the records as stored, which `codec.rs` decodes
//! (with `rmp`) and which carry the ended attempts (a reserved job's count adds its lease). An
//! ack reads one small field per job (`HMGET` of the token fields; the deadline check is the
//! head of `leases` when it is later than now, else one `ZMSCORE leases`) and never the record,
//! then removes record and token with one `HDEL` (with a retention, only the token, and the job
//! goes into `done`: the record stays as it was leased); a
//! release and a touch leave the record as it is; only a nack, a bury or an expired lease (the
//! attempt ends) rewrite it. The record's field order is shared by `lib.lua` (`F_` positions)
//! and `codec.rs` (`Record::decode`): changing it is a stored-format change (a new library
//! version).
//!
//! # Redis key layout
//!
//! Every key of topic `t` is `<prefix>:{t}:<name>` (prefix `delayq` by default). The topic
//! alphabet `[A-Za-z0-9_.:-]` has no braces, so the hash tag is always exactly the topic.
//!
//! A topic of `n` > 1 partitions (issue 18, `keys.rs`: `Part`) keeps its jobs in `n` sets of the
//! keys below, `<prefix>:{t~p~s}:<name>` for partition `p` in `0..n` (`~` is in neither
//! alphabet, so no topic's tag is a partition's), with `s` the smallest number that puts the
//! tag's slot near the middle of the `p`-th of `n` equal slices of the slot range: the
//! partitions spread evenly over the slots, hence over a cluster's primaries. `{t}` stays the
//! topic's *home*: its `config` says the partition count, and it is the only partition of a
//! topic of one (which keeps its key names). Each partition keeps a copy of the settings, with
//! the count: a push names the count it routed by and `push.lua` refuses (`WRONG_PARTITIONS`)
//! in a partition that holds another, so a process whose cached count (kept up to a minute;
//! operations on a whole topic read it afresh) is stale routes again. A change of the count (only while no partition holds a job) first
//! closes every partition of both counts (count `-n`, which pushes wait on), then writes the
//! new settings, the home last (`ops/config.rs`). A reserve starts at a random partition of
//! each topic; stats, list (the pages merged by position), pause, purge and kick-all call every
//! partition.
//!
//! | key | type | members → scores / fields → values |
//! |---|---|---|
//! | `<prefix>:{t}:jobs` | HASH | job id → record: cmsgpack of (state: 1 waiting or 4 dead, priority, due ms, seq, ttr ms, max attempts, attempts ended, back-off base ms, factor, max ms, jitter ‰, created ms, last error, body, expiry ms (0: none), on expire: 0 dead or 1 drop; records written before expiries existed end at the body and read as having none); and for each leased job `" <id>"` → its lease token |
//! | `<prefix>:{t}:delayed` | ZSET | job id → due time (ms) |
//! | `<prefix>:{t}:ready` | ZSET | `<due ms, 13 digits><seq, 16 digits><id>` → priority |
//! | `<prefix>:{t}:leases` | ZSET | job id → lease deadline (ms) |
//! | `<prefix>:{t}:dead` | ZSET | job id → time of death (ms) |
//! | `<prefix>:{t}:seq` | STRING | counter: push order of created jobs and lease tokens |
//! | `<prefix>:{t}:wake` | ZSET | one member `w` → the earliest time a blocked waiter should look |
//! | `<prefix>:{t}:counters` | HASH | `expired` → leases that ran out, `expired_jobs` → jobs whose expiry passed before a delivery, since the topic was created or purged |
//! | `<prefix>:{t}:config` | HASH | the topic's settings (`TopicConfig`; a missing field is unset): `ttr`, `max_attempts`, `bo_base`, `bo_factor`, `bo_max`, `bo_jitter` (ms, ‰), `max_body` (bytes), `done_max`, `done_age` (ms: the retention), `partitions` (the partition count: `configure.lua` refuses to change it, answering `PARTITIONS_IN_USE` and the count, while `jobs` exists); `purges` → how many times the topic was purged; `paused_until` → the end of the topic's pause (ms; `NEVER`, 2^53 − 1, until resumed; absent when not paused; `pause.lua` writes it, `reserve.lua` and `stats.lua` read it). Kept by a purge and by `configure.lua` |
//! | `<prefix>:{t}:done` | ZSET | job id → time of its ack (ms): the done jobs the retention keeps, whose records stay in `jobs` as they were leased |
//! | `<prefix>:{t}:expiring` | ZSET | job id → its expiry (ms), for each waiting (delayed or ready) job that has one: what `expire_due` (`lib.lua`) sweeps in `reserve` and `stats`; absent in a topic whose jobs have none, so they pay one lookup of a missing key per call |
//! | `<prefix>:topics` | SET | every topic pushed to since it was created or last purged (not tied to a topic's slot, so never written by a function: see "The topic registry") |
//! | `<prefix>:paused` | SET | every topic ever paused (`SADD` after a `pause.lua` that left a pause in force; a name stays after its pause ends): `topics()` lists those of them whose `paused_until` is still ahead of Redis's clock (see "The topic registry") |
//! | `<prefix>:numbers:next` | STRING | the last number claimed from the one sequence every process shares (`Engine::claim_numbers`, `ops/numbers.rs`: the beanstalkd protocol's job ids); no hash tag |
//! | `<prefix>:numbers:ranges` | ZSET | each claimed range as `<last>:<topic>` scored by its first number, so `Engine::number_topic` finds a number's topic with one `ZRANGE … BYSCORE REV LIMIT 0 1`; written after the `INCRBY` and before any number of the range is used; purge leaves it; no hash tag |
//! | `<prefix>:schedules` | HASH | every schedule (issue 14): `d:<name>` → its definition (msgpack of `ScheduleParts`, `ops/schedules.rs`), `r:<name>` → its revision, `t:<name>` → the latest fire time pushed through (ms; absent until the first); written only by `schedule_put.lua`, `schedule_pushed.lua` and `schedule_delete.lua`, one key in no topic's slot |
//! | `<prefix>:destinations` | HASH | each topic's push destination (issue 20): `<topic>` → its document (JSON of `delayq-push`'s `Destination`, secrets included; the engine does not read it), written with plain `HSET` / `HDEL`, read with `HGET` / `HGETALL`; purge leaves it; one key in no topic's slot |
//!
//! Why this shape:
//! - Scores hold only exact values: due times in ms (exact in a double for any date), priorities
//!   (u32). Ties are ordered by members, never by bits packed into a score, so the 10-year
//!   range holds. In `ready`, members of one priority sort bytewise by due time, then push
//!   order, then id: exactly the contract's order.
//! - One HASH entry and one ZSET entry per pending job (bytes per pending job with 100-byte
//!   bodies in BENCHMARKS.md). The record's state is WAITING for delayed, ready and leased
//!   jobs, so promotion, reserve and release move sorted-set members and never rewrite a
//!   record; a leased job adds one `leases` entry and one token field, a pending one nothing.
//! - The tokens live in `jobs` rather than in a HASH of their own: a small HASH is a listpack
//!   (up to `hash-max-listpack-entries`, 512 on Redis 8), in which every lookup and insert scans
//!   the list, and a worker's few hundred leases would sit in one (BENCHMARKS.md, "Redis
//!   engine: cost per call", measured it).
//! - Lease tokens come from the per-topic counter, so they grow: a downstream system can refuse
//!   writes from an older delivery. The counter survives `purge`, so a token never repeats.
//! - **Tokens survive lost writes** (`lib.lua` `fresh_tokens`). Without wait-replicas a
//!   failover can lose the last writes of the dead primary, leases and the counter's last
//!   increments with them, and the job comes back ready on the promoted replica; an `INCRBY`
//!   there handed a lost token out again (issue 37 saw a job leased again with a smaller
//!   token than its lost lease's). A reserve now raises the counter to the Redis
//!   clock in µs before it takes its tokens, so a token is never below the clock of its call,
//!   and the counter runs ahead of the clock only by the tokens of one µs (a topic hands out far
//!   fewer than a million a second). The lost tokens were below the dead primary's clock when it
//!   died; the promoted replica goes on after `cluster-node-timeout` and an election, so its
//!   tokens are larger, as long as the nodes' clocks agree within that (NTP keeps them within
//!   milliseconds). The same holds for a restart from an AOF or RDB that lost its last second.
//!   Cost: one more command per reserve call (`tests/cost_guard.rs`). Test: `tests/fencing.rs`
//!   (the replica stopped and its link dropped, the lease made, the primary killed, the replica
//!   continued and promoted: the job's new token is larger).
//!   So the Redis engine keeps the fencing invariant of ARCHITECTURE.md: a lease token is
//!   larger than every token the topic handed out before, whatever the store lost.
//!
//! **Architecture Invariant:** a job id is in `jobs` iff it is in exactly one of `delayed`,
//! `ready`, `leases`, `dead`, `done`; it has a token field in `jobs` iff it is in `leases`; its
//! record state is DEAD iff it is in `dead`, else WAITING; `done` is empty when the topic has
//! no retention and never holds more than its `max_jobs`; it is in `expiring` iff its record has
//! an expiry and it is in `delayed` or `ready`, and a job whose expiry has passed is never
//! leased.
//!
//! # The functions
//!
//! One per file; none is flagged `no-writes`, since even the reads (`get`, `list`, `stats`)
//! apply what is due first. Each is registered with its flags (`library.rs`). A function without
//! flags may write, so Redis refuses it whole (`OOM`, which the engine answers as `Error::Full`,
//! HTTP 503 `engine_full`) while memory is over `maxmemory` under `noeviction`; the check runs
//! once before the call, so a refused call wrote nothing. The functions that create no job
//! (reserve, the lease operations, reserve_job, kick, bury_waiting, reschedule, delete, get,
//! list, stats, purge, handback, config, schedule_delete) are `allow-oom`: what they add is bounded by the
//! jobs already stored and most of them free memory, so a full Redis still answers reads and can
//! be drained. Push, configure, pause, schedule_put and schedule_pushed answer `Full` until
//! memory is freed. A push stored just as Redis filled, whose registry `SADD` was then refused,
//! answers `Unavailable` (stored; a retry lists the topic), never `Full`.
//!
//! **Architecture Invariant:** `Error::Full` means nothing was written.
//!
//! | file (function `delayq_<version>_<op>`) | does | refuses with |
//! |---|---|---|
//! | `push.lua` | creates up to 100 jobs of one topic, what a job leaves unset taken from the topic's `config` (read with one `HMGET` in the same call), else from the built-in defaults the caller sends; five arguments per job (id, body, when, priority, settings), the call's distinct per-job settings sent once (with the job's on-conflict policy); an existing id is left untouched and reported, unless the push says replace or debounce and the job is waiting (out of `delayed` or `ready`): then its record is rewritten (attempts, creation time and last error kept) and placed anew | `INVALID_DELAY` (absolute time > 10 years ahead), `BODY_TOO_LARGE` (over the topic's `max_body`), `INVALID_EXPIRY` (an absolute expiry not after the due time), checked for the whole call first |
//! | `configure.lua`, `config.lua` | replace the topic's settings whole (the purge count stays), trimming `done` to the new retention at once (emptying it without one); read them | `PARTITIONS_IN_USE` with the topic's count (a new partition count while `jobs` exists: nothing changed) |
//! | `pause.lua` | pauses the topic until a time (`NEVER`: until resumed) or ends its pause; an end earlier than before signals the waiters | `INVALID_DELAY` (an end more than 10 years ahead) |
//! | `schedule_put.lua`, `schedule_pushed.lua`, `schedule_delete.lua` | keep the schedules (issue 14) in `<prefix>:schedules`: a put replaces the definition, bumps the revision and clears the progress; `schedule_pushed` moves the progress forward for the current revision only; a delete answers what it removed (reads are plain `HMGET` / `HGETALL`) | — |
//! | `reserve.lua` | settles the given leases of its topic (acks as `check_acks`, then nack, bury, release as `settle` in `lib.lua`; a job has one live token, so their order cannot matter), then applies what is due (`tick`, then `expire_due`: waiting jobs past their expiry go dead "expired" or are dropped), then takes up to N ready jobs (one whose expiry passed is expired instead): a fresh token field, deadline = now + ttr in `leases`, the record untouched (or removes them, at-most-once), then removes the acked jobs (or moves them into `done`, as `ack.lua`); passes the baton (below); each job comes back as id, token and record (its deadline is the reply's clock + its ttr). N = 0 settles only | `LEASE_LOST` per settlement |
//! | `ack.lua` | removes up to N leased jobs, checking token fields and `leases` only; with a retention (one `HMGET` of `config` per call says), moves them into `done` and trims it (`drop_acked`, `trim_done`) | `LEASE_LOST` per item |
//! | `nack.lua` | the attempt ends (attempts+1); retry after the given delay or the back-off, or dead when attempts are used up (`settle`) | `LEASE_LOST` |
//! | `release.lua` | back to ready at the original due time, the attempt not counted, the record untouched (`settle`); with a delay, due that long from now, and with a priority, that priority (the record rewritten) | `LEASE_LOST` |
//! | `touch.lua` | deadline = now + ttr (the `leases` score only) | `LEASE_LOST` |
//! | `bury.lua` | the attempt ends; dead now, with a reason and optionally a new priority (`settle`) | `LEASE_LOST` |
//! | `bury_waiting.lua` | a delayed or ready job dead now, without a lease (the HTTP `archive`), its attempts unchanged; out of `expiring` (`unplace`) | `NOT_FOUND`, `WRONG_STATE` |
//! | `reserve_job.lua` | one delayed, ready or dead job leased by its id now (beanstalkd's `reserve-job`), also on a paused topic: out of its set, a fresh token, deadline = now + ttr; a dead job's record becomes `WAITING` with its attempts kept; an expiry that has passed is cleared | `NOT_FOUND`, `WRONG_STATE` (reserved or done) |
//! | `kick.lua` | one dead job, or the oldest N, to ready now with attempts reset and an expiry that has passed cleared | `NOT_FOUND`, `WRONG_STATE` |
//! | `reschedule.lua` | a delayed or ready job to a new due time, keeping push order and attempts | `NOT_FOUND`, `WRONG_STATE`, `INVALID_DELAY` |
//! | `delete.lua` | removes a job in any state | — (answers 0) |
//! | `get.lua`, `list.lua`, `stats.lua` | read, after `tick`; a done job only while the retention keeps it (its ack later than now − `done_age`) | — |
//! | `purge.lua` | `UNLINK`s every key of the topic but `seq` and `config` (the counters restart), and counts the purge in `config` | — |
//! | `handback.lua` | gives a topic's next event back to its wake key (`ZADD LT`), unless the topic holds no job (so an emptied or purged topic keeps no wake key) | — |
//!
//! # Done jobs
//!
//! A topic with a retention keeps its acked jobs in `done` (their records stay in `jobs`, as
//! leased, so an ack still writes no record). The hot path pays for the feature only where it
//! must: an ack-carrying call (`ack.lua`, `reserve.lua` with settlements) reads the retention
//! with one `HMGET` of `config`, and a topic without one then removes its jobs as before;
//! every function takes two more `KEYS` (`config`, `done`). What that costs a worker's cycle
//! is measured in BENCHMARKS.md ("Redis engine: cost per call").
//!
//! With a retention, each ack-carrying call then trims `done`: at most 1000 jobs whose ack is
//! older than `done_age` (reads never show those: `get`, `list` and `stats` check the age, so
//! the removal only has to keep pace with the acks), and the oldest beyond `done_max` (as many
//! as the call added). `configure.lua` trims to a new retention at once, emptying `done`
//! without one: at most `done_max` (≤ 100,000) jobs of work.
//!
//! # The topic registry
//!
//! `Engine::topics` lists `<prefix>:topics` and the topics paused now, jobs or not
//! (`ops/topics.rs`). A function touches the keys of one topic only (one
//! cluster slot), so the registry is written with plain commands around the calls:
//!
//! - **Push.** Each process remembers the topics it has put in the registry, each with the
//!   topic's purge count (`config` field `purges`) at that time. `push.lua` answers the purge
//!   count (one field of the `config` hash it reads anyway), and after the push succeeded the
//!   process sends one `SADD` for the topics whose count it has not registered. A topic a
//!   process keeps pushing to costs nothing more; a purge, by any process, costs each pushing
//!   process one `SADD` at its next push. A refused push registers nothing.
//! - **Purge.** `purge.lua` removes the jobs and raises the purge count; then one pipeline
//!   `SREM`s the topic and checks whether it holds jobs again (`EXISTS jobs`), and only then
//!   `SADD`s it back. In this order no topic with jobs is left off the list: a push that
//!   comes after `purge.lua` answers the new count, so its process registers the topic after
//!   that push, and if that `SADD` came before the `SREM`, the check after the `SREM` sees the
//!   push's jobs.
//! - **Pause.** A pause lives in each partition's `config` (`paused_until`). After `pause.lua`
//!   left a pause in force, one `SADD` puts the topic in `<prefix>:paused`; `topics()` reads
//!   both sets in one pipeline and, for the paused names not in the registry, the partitions'
//!   `paused_until` against Redis's clock. A name is never removed from `<prefix>:paused`:
//!   an `SREM` when a pause ends could race with another process's new pause and hide it, and
//!   the check of the clock makes an ended pause leave the list by itself.
//!
//! A lease is live while `now < deadline`: after the deadline, ack, nack, touch, bury and release
//! answer `LEASE_LOST` even if no one has reclaimed the job yet. `tick(now, limit)` moves at most
//! `limit` (1000) expired leases (each fails with "lease expired": back-off, or dead) and at most
//! `limit` due delayed jobs (to ready); reads call it too, so the state a read reports is the one
//! time gives the job, as in the embedded engine whose timers fire on time.
//!
//! # Waiting and promotion
//!
//! No loop polls Redis. A reserve that finds nothing registers with the engine's **waker task**
//! and waits on a per-topic `Notify`, until its deadline.
//!
//! - **Timers.** Every reserve reply carries Redis's clock (µs) and the topic's next event (the
//!   earliest due time or lease deadline, or "now" if jobs are still ready). `clock.rs` keeps the
//!   tightest recent upper bound of the offset between Redis's clock and the local monotonic
//!   clock (from the reply's arrival time), so a local timer set for Redis time `T` never fires
//!   before Redis reaches `T`; it is rounded up to the next millisecond and never set less than
//!   1 ms ahead after a "not yet" reply, so an early estimate cannot become a busy loop. The waker
//!   sleeps until the earliest timer of a topic with waiters and wakes one waiter (`notify_one`).
//!   Waiters, timers and signals are per partition (a topic of one partition: per topic); a
//!   waiter woken for a partition looks at that partition only (its other partitions have
//!   timers and signals of their own), while a first pass and a safety wake look at every
//!   partition of every topic asked, from a random one.
//! - **Signals.** A function that creates a new earliest event (a job ready when none was, a due
//!   time or deadline before the current heads) adds it to the topic's wake key with `ZADD LT`.
//!   The waker keeps one `BZPOPMIN` on the wake keys of every topic with local waiters, on a
//!   dedicated connection with no response timeout (a blocking command on the shared multiplexed
//!   connection would stall every caller; redis-rs's default 500 ms response timeout would cut
//!   it). A popped signal arms that topic's timer. A new topic is added by `CLIENT UNBLOCK` and
//!   resending. (On a cluster: one such wait per hash slot, see "Redis Cluster" below.) Redis checks blocked-command timeouts only `hz` times a second, so `BZPOPMIN`'s
//!   timeout is never used as the due-time timer: local timers are.
//! - **The baton.** A reserve that hands out jobs signals the topic's next event, so some blocked
//!   waiter (in any process) learns of it even if this caller stops reserving. When the last local
//!   waiter of a topic leaves while its process knew of the topic's next event (perhaps from a
//!   signal it popped itself), the event goes back to Redis (`handback.lua`: `ZADD LT`, unless the
//!   topic holds no job any more); so does a signal popped for a topic no one in the process waits
//!   on any more. A new waiter starts from what its own first
//!   pass learnt, and keeps the earlier of what it knew and what a reply says.
//! - **Chain.** When jobs are left ready after a reserve, the next local waiter is woken at once
//!   (and the baton reaches other processes).
//! - **Safety wake.** A waiter also looks on its own every `safety_wake` (30 s, jittered up to 40 %
//!   later, so a wait no longer than that never pays for it: the next reserve's first pass looks), and
//!   every waiter looks again when the waker's connection comes back after a failure.
//! - Busy workers never involve the waker: only a reserve whose first pass found nothing
//!   registers, and a producer in the same process wakes local waiters directly.
//! - **Quiet topics** (`ops/reserve.rs`: `Look::First`). A call that follows, within 2 s, a
//!   long-poll of this process over the same topic that ended with nothing looks at one
//!   partition of it (a random one) instead of all: that poll watched every partition's wake key
//!   all along, and what became due since has left a signal (kept in the key until a waiter
//!   takes it, handed back by a waiter that leaves knowing of it), which the new call's wait
//!   takes at once. So an idle worker on 16 partitions costs what it costs on one
//!   (`tests/partitions.rs`), and the random look finds, within a few calls, what a signal lost
//!   with a crashed process left behind (the safety wake still looks at every partition).
//!
//! An idle reserver costs one three-command call per long-poll and nothing in between
//! (`idle_reservers_cost_under_one_command_per_second` holds it under one command a second);
//! BENCHMARKS.md ("Redis engine: idle cost", "Redis engine: lateness of delayed jobs") has
//! the figures.
//!
//! # What happens to a job when something fails
//!
//! | failure | what happens |
//! |---|---|
//! | A worker dies holding a lease | The lease deadline passes; the next reserve, get, list or stats on the topic (any process) fails the delivery with "lease expired": back to delayed with the back-off and attempts counted, or dead when attempts are used up. A blocked waiter learnt the deadline from the baton, so it wakes for it. A late ack from the dead worker's lease is `LEASE_LOST`. |
//! | A process dies in the middle of a function call | Redis runs a function atomically: either all of its writes happened or none. A call that already ran is not undone by the caller's death; its reply is lost (a push's id makes retrying it safe; an ack retried answers `LEASE_LOST`, meaning "already done or expired"). |
//! | A process dies between two calls | Nothing is held across round trips, so nothing is left half done: a reserved job stays leased until its deadline. |
//! | Redis restarts | Jobs survive as far as Redis persistence allows: with AOF `appendfsync always` every acknowledged write survives; `everysec` may lose the last second; without persistence everything is lost. Redis persists the functions library with the data; without persistence it is loaded again at the first call that answers "function not found" (pipelines resend just those calls). Deadlines and due times are absolute Redis times, so a lease that expired while Redis was down is reclaimed at once. Calls during the outage fail with `Unavailable`. Tested with a kill -9 of Redis under AOF `always`. |
//! | A wake-up signal is lost (popped by a process that then crashed, or lost on a dropped connection) | The job is not lost, only its signal: a waiter finds it at its next timer, its safety wake (≤ 42 s), or the first pass of the next reserve, or at once after the waker reconnects. Tested by seeding a ready job with no signal. |
//! | Redis evicts keys (`maxmemory-policy allkeys-*`) | Jobs vanish silently. The engine warns at start; run Redis with `noeviction`. |
//! | Redis reaches `maxmemory` (`noeviction`) | Pushes answer `Full` (HTTP 503 `engine_full`) and change nothing; reads, reserves, acks, deletes and purges go on, so the queue drains; pushes succeed once memory is freed. A Redis restarted without persistence while at `maxmemory` cannot load the library (`FUNCTION LOAD` is refused), so every call answers `Full` until memory is freed. Tested by `tests/faults.rs`. |
//! | Redis is slow or paused (`DEBUG SLEEP`, `CLIENT PAUSE`) | Calls answer `Unavailable` after `response_timeout`; a call held by Redis runs later whole or not at all, and a retry by id leaves one job. The same handle and its waiters recover by themselves. Tested by `tests/faults.rs`. |
//! | A connection is killed mid-call (`CLIENT KILL`) | The call answers `Unavailable` and the engine reconnects. A push retried is idempotent; a retried ack answers ok, `NotFound` or `LeaseLost`; a reserve whose reply was lost has its leases run out, and its jobs come back counted as expired leases. Tested by `tests/faults.rs`. |
//!
//! # Redis Cluster
//!
//! `redis+cluster://h1:p1,h2:p2` (or `rediss+cluster://`, credentials as for one node) makes
//! `Conn` a redis-rs `ClusterConnection` (one multiplexed connection per node). What changes:
//!
//! - **Slot per partition.** Every call touches the keys of one partition of one topic, which
//!   share one hash tag (`{topic}`, or `{topic~p~s}` for a partition of a partitioned topic), so
//!   a call is one slot, routed by its first key (for `FCALL`, the first key after numkeys;
//!   `conn/cluster.rs` computes the same route redis-rs does). redis-rs refuses a pipeline whose
//!   commands lie in different slots, so `Conn::pipeline` sends one pipeline per slot,
//!   concurrently, each in its given order, and puts the replies back in order. A batch over
//!   topics of three primaries costs one round trip to each, in parallel.
//! - **Per-slot independence** (issue 37; `conn/per_slot.rs`, `conn/shards.rs`,
//!   `RedisConfig::slot_timeout`).
//!   An operation whose calls span several slots answers each slot's part from that slot, so a
//!   primary that is dead or hung (SIGSTOP: connections open, no answer) holds up only its
//!   own topics. The reserve (`ops/reserve.rs` `reserve_once`) of a request whose topics,
//!   partitions or settlements lie in several slots sends its first round trip as one pipeline
//!   per slot, concurrently, and waits for each slot, there and in the later partitions' calls,
//!   at most the slot timeout (500 ms; plus the wait timeout with wait-replicas). Those calls
//!   (`Conn::bounded`) go through a second cluster connection that gives up after two retries
//!   (`Conn::pipeline_quick`, `conn/cluster.rs` `QUICK_RETRIES`): a killed primary's address
//!   refuses the connection and the other nodes answer MOVED to it, and redis-rs, which puts a
//!   call whose connection broke back to pending, would retry it (48 times on the main
//!   connection) until the slot timeout cut it; on the quick one it fails within milliseconds.
//!   Two retries follow a MOVED after a failover or an ASK during a migration; a call refused
//!   unrun (TRYAGAIN, ASK, READONLY) is sent again through the main connection. So the slot
//!   timeout bounds a hung primary, and a killed one costs milliseconds. A slot that
//!   fails or is silent is skipped for this pass: the other slots' jobs are handed out, and
//!   its settlements answer its error, each its own (`Error::copy_for_another`), never the
//!   others'. The slot is then *unreachable*, and so is every other slot of its shard (the
//!   primary and replicas that serve it, and the slot ranges they serve, as `CLUSTER SHARDS`
//!   tells: `conn/shards.rs`; a dead or hung primary answers for none of its slots, and a
//!   failover moves its ranges whole to one replica), for twice the slot timeout (wait part
//!   included; at least 1 s, so the mark outlives the wait that made it), or until a call to
//!   one of them succeeds: the rest of the pass and later calls skip them without waiting,
//!   unless every slot of their request is, when a pass asks each shard again, once. So a dead
//!   or hung primary costs a pass one slot timeout, however many of its slots the request's
//!   topics lie in. While a shard is skipped, its probe (`conn/probe.rs`, one task per shard)
//!   sends an `EXISTS` of a key in the marked slot (`<prefix>:probe:{N}`: only the slot's
//!   owner answers it; a `PING` was answered by another node when redis-rs could not reach a
//!   killed primary), one at a time: every 100 ms without an
//!   answer it pushes the skip on by a skip period, and an answer ends the skip (a promoted
//!   replica answers once redis-rs follows the new map). So a primary that stays down costs
//!   each process one slot timeout in all, not one per skip period, and its topics are served
//!   again within about 100 ms of its answer. A probe no caller consulted for 10 s stops, and
//!   its mark runs out as it would without it (an engine dropped during an outage leaves no
//!   task behind for long). The shard map is read at connect and again, in a task of its own, at a
//!   mark when older than 10 s; a map gone stale after a slot migration only makes a skip too
//!   wide or too narrow for one skip period; without it (no `+cluster|shards` permission, a
//!   failed or unreadable read) marks cover one slot each, and the log says so once.
//!   **Architecture Invariant:** no caller waits for the shard map, and a healthy cluster's
//!   calls never look it up (a mark covers its one slot until the map is known). A call that
//!   timed out is not cancelled (it was sent and may run when the primary answers again): a
//!   task keeps its reply, and the jobs that reply leased are released at once
//!   (`give_back_late`, the pattern of `detach_lease`), unless the reply outlives
//!   `response_timeout`, when they wait for their ttr. The pass fails only when no slot
//!   answered. What the record holds is told per topic by `Engine::unreachable`
//!   (`ops/reach.rs`: a topic any of whose partitions, as this process last read them, lies in
//!   a skipped slot; a lock and no lookup while nothing is marked, never a call), which the
//!   server answers in a reserve's `unreachable`, a `delayq_topic_unreachable` gauge and
//!   `/v1/topics`, and the worker logs once per change. Those two listings read the topics'
//!   stats with `Engine::stats_each` (`ops/admin.rs` `stats_each`: 16 topics at a time, each
//!   as a reserve reads: its count within the slot timeout, its partitions through
//!   `Conn::per_slot`), and the server (`metrics.rs` `stats_or_unreachable`) lists a topic
//!   whose stats failed and which `Engine::unreachable` then names apart; any other error
//!   fails the listing. Other engines read them one by one (the trait's default).
//!   `ack_batch` (`Conn::per_slot`) likewise: one pipeline per slot, each ack
//!   answered by its own slot, the batch failing whole only when every slot failed. So does a
//!   batch push (`ops/push.rs` `push_each`, `Engine::push_each`): a batch over several topics
//!   reads each count as a reserve does, the check of a batch of several calls reads each
//!   topic's settings and its primary's clock in one `config` call per topic through
//!   `Conn::per_slot` (a topic whose settings did not come is not sent: its jobs answer that
//!   slot's error), and the push calls go through `Conn::per_slot`, each job answered by its
//!   own slot; the server answers a partial batch 503 with each job's result and id
//!   (`PushBatchFailed`). A long-poll
//!   over several slots keeps waiting when a pass woken for one partition fails on its slot; a
//!   topic's partition count, read at most once a minute, is read within the slot timeout and
//!   falls back to the count read before (a timeout marks its slot, as a call's would). On one
//!   slot alone (one topic of one partition), and on one node, nothing changes: one pipeline,
//!   waited for up to `response_timeout`, the same round trips and commands as before
//!   (`tests/cost_guard.rs`). The worker retries a
//!   settlement answered alone with a retryable error while its lease lasts. Tests:
//!   `tests/cluster_independence.rs` (a primary SIGSTOPped under a reserve, an ack batch, a
//!   settle-and-reserve and a long-poll over two primaries, then continued: the jobs a late
//!   reserve leased come back at once, every job delivered and acked once; a reserve over three
//!   topics of the stopped primary waits for it once), `tests/cluster/` (a primary killed
//!   under traffic: the other primaries' topics flow on, for a consumer of every topic too).
//! - **Functions on every primary.** At connect `FUNCTION LOAD` goes to every primary (redis-rs
//!   routes it so), and `INFO` checks every primary's version. A primary that answers "function
//!   not found" later (a promoted replica that missed the load, a node added, a flush) gets
//!   `FUNCTION LOAD` routed to that slot's primary, then the call (or just the pipeline's calls
//!   that failed so) is sent once more. Redis replicates `FUNCTION LOAD`, so a replica promoted
//!   after a failover has it when it had caught up (replication is asynchronous; a replica that
//!   had not lacks it, and the reload covers that). Tests: `tests/cluster/` (every operation on
//!   topics of every primary, `FUNCTION FLUSH`, failover, a slot migrating twice under 10,000
//!   jobs, a primary killed under 10,000 jobs with wait-replicas 1, waits across primaries
//!   through a migration and a failover) and
//!   `tests/cluster_conformance.rs` (the whole conformance suite on a cluster; its cases share
//!   one cluster per test process, each under a key prefix of its own).
//! - **Timeouts and redirections.** redis-rs has no response timeout on a cluster connection
//!   unless told: `response_timeout` bounds each try and, as the overall timeout, a command with
//!   all its retries. MOVED and ASK are followed; TRYAGAIN (a multi-key call on a migrating slot:
//!   every delayq call names keys that may not exist yet, so calls on a migrating slot wait until
//!   the migration ends), CLUSTERDOWN and a dead node's connection errors are retried after
//!   10 to 500 ms pauses; READONLY (a demoted primary) refreshes the slot map and retries. A
//!   redirection in the middle of a pipeline makes redis-rs resend the whole (single-slot)
//!   pipeline, and so does a connection that broke (a primary killed): a push is idempotent
//!   while its job lives; a settle-and-reserve or ack whose first try landed answers as a
//!   retried call does (`LEASE_LOST`/`NOT_FOUND` for the ack, leases that expire for the
//!   reserve), never a double delivery without a lease expiry. The one duplicate this allows: a
//!   push whose first try landed and replicated just before its primary died, re-sent to the
//!   new primary after its job was delivered and acked there, creates the job again (a new job,
//!   attempt 1). `tests/cluster/` counts those in its failover under traffic (RELIABILITY.md).
//! - **Durability across a failover** (`RedisConfig::wait_replicas`, off by default; one node
//!   with replicas too): `Conn` ends every pipeline holding a state-changing call, and every
//!   such single call, with `WAIT n timeout`, so it goes on the same connection to the same
//!   node (a pipeline is routed by its first key; `WAIT` alone would go to every primary).
//!   `WAIT` counts acknowledgements of the connection's last write, ours or a later one of the
//!   shared connection, so success means the replicas hold our write. Too few answer
//!   `Error::NotReplicated` for the whole call, every call of it applied on the primary.
//!   **Architecture Invariant:** with the option on, no state-changing call answers success
//!   before `wait_replicas` replicas acknowledged it.
//! - **Failover.** While a primary is dead, calls on its slots fail with connection errors,
//!   then CLUSTERDOWN or MOVED once its replica is promoted; `Conn` retries them (above), so a
//!   call on that slot alone stalls for the failover (2 to 3 times `cluster-node-timeout`) and
//!   answers `unavailable` only if that outlasts `response_timeout`; an operation over several
//!   slots answers that slot's part `unavailable` after the slot timeout and the others' at
//!   once (per-slot independence, above). The promoted replica holds what
//!   had replicated: without wait-replicas, writes answered before it had them (a primary cut
//!   off that keeps taking writes until it learns of the promotion, a machine lost) are
//!   missing (a pushed job gone, an acked job back, a lease back to an older state, which its
//!   deadline settles as for a crashed worker); with it, none answered with success is. The promoted
//!   node serves the slots on its own clock (below). Waits follow the MOVED answer; the library
//!   is loaded there if missing. Tests: `tests/cluster/` (a primary killed under 10,000 jobs
//!   with wait-replicas 1). Measured loss without the option: `BENCHMARKS.md`, W8.
//! - **The clock** is each primary's own: a topic's times all come from its primary, so a
//!   topic's order and due times are consistent; `now()` reads any node. After a failover or a
//!   slot migration a topic's times come from its new primary's clock: a skew of d between the
//!   machines moves its due times and lease deadlines by d (NTP keeps it to milliseconds).
//! - **Readiness** (`conn/readiness.rs`, `Engine::readiness`, the server's `/readyz`) is the
//!   cluster's own verdict: `cluster_state` of `CLUSTER INFO` from one connected node, not
//!   `TIME`, which any live node answers. A node reports `fail` once some slot has no live
//!   primary (a dead primary without replica, after `cluster-node-timeout`; under the default
//!   `cluster-require-full-coverage yes` every call then meets CLUSTERDOWN) or when it is cut
//!   off from most primaries; the reason names the slot counts. With full coverage not
//!   required the cluster stays `ok` and readiness ready, the uncovered slots' topics
//!   answering `unavailable`. A user without `+cluster|info` gets `TIME` and one warning.
//!   Tests: `tests/cluster/` (the permission), `delayq-server`'s `tests/readyz.rs` (the
//!   cluster down and back, and without full coverage).
//! - **The registry** `delayq:topics` has no hash tag: one SET on one primary, written with
//!   `SADD` once per topic per process, read with `SMEMBERS` by `topics()` (with
//!   `delayq:paused`, another such SET, written once per pause), the stats of every
//!   topic and the metrics scrape (one call to that primary; the stats then go to each topic's
//!   own primary). The two sets are read through `Conn::per_slot`, each within the slot
//!   timeout: a set whose primary does not answer answers its members as this process last
//!   read them (`Ops::listed`; none read: the error), and a paused topic whose pause cannot
//!   be read is kept, so a dead or hung primary holding them does not hold up the listings
//!   (`delayq-server`'s `tests/cluster_unreachable.rs`). Nor the pushes: a registration's
//!   `SADD` that gets no answer within the slot timeout (or "unavailable") goes on in a task
//!   of its own (`Ops::register_later`: again every 500 ms for up to 5 minutes, one task per
//!   set of topics), and the push answers with its jobs stored
//!   (`tests/cluster_independence.rs`).
//! - **The destinations** `delayq:destinations` have no hash tag: one HASH on one primary,
//!   read with `HGETALL` by every server's forwarder once a second.
//! - **The schedules** `delayq:schedules` have no hash tag either: one HASH on one primary,
//!   changed by the schedule functions (one call there per put, delete and recorded fire) and
//!   read with `HGETALL` by every server's scheduler once per reload (10 s) and when it wakes
//!   for a fire; the fires themselves are pushes to their topics' primaries. So the primary
//!   that holds the registry and the schedules serves a few calls per process per 10 s beside
//!   its share of the jobs; a primary lost without wait-replicas can take recent schedule
//!   changes with it, as it can jobs.
//! - **Waiting.** The waker's one `BZPOPMIN` over every topic's wake key would be a CROSSSLOT
//!   error on a cluster (one command cannot name keys of several slots, even of one node), and a
//!   blocking command on the shared cluster connection would stall every call to that node. So
//!   on a cluster `wait/slots.rs` runs one task per hash slot with local waiters (in practice one
//!   per topic waited on), each blocking with `BZPOPMIN` on that slot's wake keys on a plain
//!   connection of its own to the node serving it: it starts at a seed and follows MOVED, which
//!   Redis also answers to a client blocked on a slot that migrated or failed over; TRYAGAIN,
//!   ASK, CLUSTERDOWN and lost connections are retried after a pause (100 ms doubling to 5 s).
//!   A seed, not yet known to serve the slot, is first asked with a `BZPOPMIN` of 1 ms bounded
//!   to 1 s, so a hung seed cannot hold a healthy slot's wait; hand-backs go out in tasks of
//!   their own, so one to a hung primary holds up no other slot's timers.
//!   After any interruption the task wakes one waiter of each of its topics once it blocks
//!   again, since a signal may have been popped and lost meanwhile. A task ends when its slot
//!   has no waiter left after a wait returned. Idle cost: one `BZPOPMIN` per slot per 60 s;
//!   connections: one per slot waited on, besides the cluster connection's one per node. Timers,
//!   hand-backs and the local wake-ups for pushes are the same as on one node.
//!
#![deny(missing_docs)]

mod clock;
mod codec;
mod config;
mod conn;
mod engine;
mod error;
mod keys;
mod library;
mod ops;
mod wait;

pub use config::RedisConfig;
pub use engine::RedisEngine;
