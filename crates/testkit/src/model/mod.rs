//! Model-based tests of the contract: a reference [`Model`] (pure, `BTreeMap`s, the real
//! `delayq_core` types), random sequences of operations ([`Op`], proptest strategies with
//! shrinking) from several logical clients, and a [`Runner`] that runs them against an
//! engine and compares every answer and the resulting state with the model, allowing only
//! the freedom the contract allows (the engine time of each call within the window of two
//! clock reads, the first topic of a multi-topic reserve, when an engine notices a lease ran
//! out, the values of lease tokens: only their order within a topic is checked, each larger
//! than every one before, and the model keeps the engine's). [`check`] drives it from a
//! test: `DELAYQ_MODEL_CASES` and `DELAYQ_MODEL_OPS` set the number of sequences and their
//! longest length for a longer soak.
//!
//! - `state`: [`Model`], [`Refusal`], [`DeliveryView`], [`TokenOutOfOrder`].
//! - `op`: [`Op`] and the strategies.
//! - `run`: [`Runner`] and [`Totals`].
//! - `regressions`: [`REGRESSIONS`], shrunk sequences of disagreements found and fixed.

mod op;
mod regressions;
mod run;
mod state;

use std::sync::Mutex;

use delayq_core::Engine;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestError, TestRunner};

pub use op::{
    CLIENTS, IDS, JobSpec, LeasePick, Op, SettleKind, TOPICS, backoff, id, op, sequence, topic,
};
pub use regressions::{REGRESSIONS, Regression};
pub use run::{GUARD_MS, MAX_WINDOW_MS, Runner, Totals};
pub use state::{DeliveryView, Model, Refusal, TokenOutOfOrder};

/// How many sequences and how long: the defaults of a test, overridden by
/// `DELAYQ_MODEL_CASES` and `DELAYQ_MODEL_OPS`.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Sequences to run (shrinking a failure runs more).
    pub cases: u32,
    /// The longest sequence.
    pub max_ops: usize,
    /// The proptest regression file, relative to the crate (e.g.
    /// `tests/model.proptest-regressions`); its seeds run first.
    pub regressions: &'static str,
}

impl Plan {
    /// `cases` sequences of up to `max_ops` operations unless the environment says otherwise.
    pub fn from_env(cases: u32, max_ops: usize, regressions: &'static str) -> Plan {
        let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
        Plan {
            cases: var("DELAYQ_MODEL_CASES").map_or(cases, |v| v as u32),
            max_ops: var("DELAYQ_MODEL_OPS").map_or(max_ops, |v| v as usize),
            regressions,
        }
    }
}

/// Runs one sequence against the engine `open` returns (an engine on an empty store).
pub async fn run_sequence<E: Engine>(engine: &E, ops: &[Op]) -> Result<Totals, TestCaseError> {
    let mut runner = Runner::new(engine);
    let r = runner.run(ops).await;
    r.map(|()| runner.totals)
}

/// Replays every sequence of [`REGRESSIONS`], each on the engine `open` makes (given its
/// number), and panics naming the first that fails.
pub async fn replay_regressions<E, G, F, Fut>(open: F)
where
    E: Engine,
    F: Fn(u64) -> Fut,
    Fut: Future<Output = (E, G)>,
{
    for (k, (name, ops)) in REGRESSIONS.iter().enumerate() {
        let (engine, guard) = open(k as u64).await;
        if let Err(e) = run_sequence(&engine, &ops()).await {
            panic!("regression {name}: {e}");
        }
        drop(guard);
    }
}

/// The runtime the model tests run their engines on ([`check`]): two worker threads, as
/// the engines' own tests use.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Checks random sequences against engines that `open` makes, one per sequence (given the
/// sequence's number, e.g. for a key prefix), on `rt`; `open` answers the engine and what
/// must live as long as it (a temporary directory). Panics with the shrunk sequence when
/// one fails; answers what the runs did.
pub fn check<E, G, F, Fut>(rt: &tokio::runtime::Runtime, plan: &Plan, open: F) -> Totals
where
    E: Engine,
    F: Fn(u64) -> Fut,
    Fut: Future<Output = (E, G)>,
{
    let config = Config {
        cases: plan.cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(plan.regressions))),
        max_shrink_iters: 400,
        max_global_rejects: 10_000,
        ..Config::default()
    };
    let totals = Mutex::new(Totals::default());
    let mut runner = TestRunner::new(config);
    let result = runner.run(&sequence(plan.max_ops), |ops| {
        let case = {
            let mut t = totals.lock().expect("totals lock");
            t.cases += 1;
            t.cases
        };
        let r = rt.block_on(async {
            let (engine, guard) = open(case).await;
            let r = run_sequence(&engine, &ops).await;
            drop(engine);
            drop(guard);
            r
        });
        let mut t = totals.lock().expect("totals lock");
        match r {
            Ok(done) => {
                t.add(&Totals { cases: 0, ..done });
                Ok(())
            }
            Err(e) => {
                if matches!(e, TestCaseError::Reject(_)) {
                    t.rejected += 1;
                }
                Err(e)
            }
        }
    });
    let totals = totals.into_inner().expect("totals lock");
    match result {
        Ok(()) => totals,
        Err(TestError::Fail(why, ops)) => panic!(
            "the engine and the model disagree: {why}\nshrunk sequence ({} ops):\n{ops:#?}\nruns so far: {totals:?}",
            ops.len()
        ),
        Err(TestError::Abort(why)) => panic!("model check aborted: {why}; runs: {totals:?}"),
    }
}
