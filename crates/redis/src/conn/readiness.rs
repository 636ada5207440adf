//! What a readiness probe asks Redis (`Engine::readiness`, the server's `/readyz`): on one
//! node, that it answers (`TIME`); on a Redis Cluster, the cluster's own verdict, the
//! `cluster_state` line of `CLUSTER INFO`, from whichever node redis-rs has a live
//! connection to. One round trip either way.
//!
//! Why the verdict and not `TIME` on a cluster: any live node answers `TIME`, so a cluster
//! that refused every call looked ready (issue 36, bug 7). A node reports
//! `cluster_state:fail` when some hash slot has no live primary (once the others have marked
//! a dead primary failed, after `cluster-node-timeout`; under the default
//! `cluster-require-full-coverage yes` the cluster then answers CLUSTERDOWN to every call)
//! or when it is cut off from most primaries; either way, it is what every call meets. With
//! `cluster-require-full-coverage no` the cluster stays `ok` and serves the slots it still
//! covers, and readiness says ready too: the operator chose to keep the live primaries'
//! topics served (calls on the uncovered slots answer `unavailable`). Between a primary's
//! death and the cluster noticing, the cluster is still `ok`, and so is readiness; calls on
//! that primary's slots wait for it.

use std::sync::atomic::{AtomicBool, Ordering};

use delayq_core::{Readiness, Result};
use redis::cluster_async::ClusterConnection;
use redis::{ErrorKind, ServerErrorKind};

use super::{Conn, Inner};
use crate::error::map_redis_err;

/// The hash slots of a Redis Cluster.
const SLOTS: u32 = 16384;

impl Conn {
    /// Whether Redis can serve calls now: one node answers `TIME`; a cluster reports
    /// `cluster_state:ok` (module docs). An error is a Redis that did not answer.
    pub(crate) async fn readiness(&self) -> Result<Readiness> {
        match &self.inner {
            Inner::Node(_) => {
                self.query::<(u64, u64)>(&redis::cmd("TIME"), "reading the Redis clock")
                    .await?;
                Ok(Readiness::Ready)
            }
            Inner::Cluster(c) => cluster(self, c).await,
        }
    }
}

/// Set once the log has said that the Redis user may not run `CLUSTER INFO`.
static WARNED_NO_PERM: AtomicBool = AtomicBool::new(false);

/// The cluster's verdict. A Redis user without the permission (`+cluster|info`, which delayq
/// did not need before its readiness looked at the cluster) gets the check of one node,
/// `TIME`, and one warning in the log, so that an upgrade does not take every server out of
/// its load balancer.
async fn cluster(conn: &Conn, c: &ClusterConnection) -> Result<Readiness> {
    let info = redis::cmd("CLUSTER")
        .arg("INFO")
        .query_async::<String>(&mut c.clone())
        .await;
    match info {
        Ok(info) => Ok(verdict(&info)),
        Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoPerm) => {
            if !WARNED_NO_PERM.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    error = %e,
                    "the Redis user may not run CLUSTER INFO, so readiness (/readyz) only checks that a node answers, not that the cluster is up; allow +cluster|info"
                );
            }
            conn.query::<(u64, u64)>(&redis::cmd("TIME"), "reading the Redis clock")
                .await?;
            Ok(Readiness::Ready)
        }
        Err(e) => Err(map_redis_err("reading the Redis Cluster's state", e)),
    }
}

/// What a `CLUSTER INFO` answer says: ready when `cluster_state:ok`; otherwise not, with the
/// reason its slot counts give.
fn verdict(info: &str) -> Readiness {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let count = |name: &str| field(name).and_then(|v| v.parse::<u32>().ok());
    let state = field("cluster_state").unwrap_or("unknown");
    if state == "ok" {
        return Readiness::Ready;
    }
    let unassigned = count("cluster_slots_assigned").map_or(0, |n| SLOTS.saturating_sub(n));
    let failed = count("cluster_slots_fail").unwrap_or(0);
    let mut missing = Vec::new();
    if failed > 0 {
        missing.push(format!(
            "{failed} of its {SLOTS} hash slots are on a failed primary"
        ));
    }
    if unassigned > 0 {
        missing.push(format!("{unassigned} are assigned to no primary"));
    }
    let why = if missing.is_empty() {
        "every slot has a primary, but the node delayq asked cannot reach most of them (a network partition) or is rejoining the cluster, so it refuses every call until it reaches them".to_string()
    } else {
        format!(
            "{}, so it refuses every call until each slot has a live primary again (a replica taking over, or the primary back)",
            missing.join(" and ")
        )
    };
    Readiness::NotReady {
        reason: format!(
            "the queue's store, a Redis Cluster, is down (cluster_state:{state}): {why}; retry later"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(state: &str, assigned: u32, fail: u32) -> String {
        format!(
            "cluster_enabled:1\r\ncluster_state:{state}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{}\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:{fail}\r\ncluster_known_nodes:3\r\ncluster_size:3\r\n",
            assigned - fail
        )
    }

    fn reason(r: Readiness) -> String {
        match r {
            Readiness::NotReady { reason } => reason,
            Readiness::Ready => panic!("ready"),
        }
    }

    #[test]
    fn an_ok_cluster_is_ready_even_with_slots_uncovered() {
        assert_eq!(verdict(&info("ok", SLOTS, 0)), Readiness::Ready);
        // `cluster-require-full-coverage no`: the cluster serves what it covers.
        assert_eq!(verdict(&info("ok", SLOTS, 5461)), Readiness::Ready);
    }

    #[test]
    fn a_failed_cluster_says_which_slots_lack_a_primary() {
        let r = reason(verdict(&info("fail", SLOTS, 5461)));
        assert_eq!(
            r,
            "the queue's store, a Redis Cluster, is down (cluster_state:fail): 5461 of its 16384 hash slots are on a failed primary, so it refuses every call until each slot has a live primary again (a replica taking over, or the primary back); retry later"
        );
        let r = reason(verdict(&info("fail", 16000, 10)));
        assert!(
            r.contains("10 of its 16384 hash slots are on a failed primary and 384 are assigned to no primary"),
            "{r}"
        );
    }

    #[test]
    fn a_failed_cluster_with_every_slot_served_is_a_partition() {
        let r = reason(verdict(&info("fail", SLOTS, 0)));
        assert!(r.contains("cluster_state:fail"), "{r}");
        assert!(r.contains("network partition"), "{r}");
    }

    #[test]
    fn an_answer_without_a_state_is_not_ready() {
        let r = reason(verdict("cluster_enabled:1\r\n"));
        assert!(r.contains("cluster_state:unknown"), "{r}");
    }
}
