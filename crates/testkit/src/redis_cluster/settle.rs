//! Whether a cluster has settled, asked of each node on blocking connections: every node
//! healthy, in agreement on roles and slots, every slot served, every replica synced and
//! streaming (it acknowledged a write made through its primary after its sync). Every
//! connection goes in as the harness does ([`Access`]: TLS, the default user's password).

use std::time::{Duration, Instant};

use super::nodes::{ClusterNode, Entry, field, parse_nodes};
use super::slot::{SLOTS, key_slot};
use crate::redis_server::Access;

/// How long [`replicated`] lets the replicas of one primary take to acknowledge a write.
/// A replica that just finished a diskless sync only receives the stream after its next
/// `REPLCONF ACK`, which it sends once a second: see [`replicated`].
const REPLICATION_WAIT: Duration = Duration::from_millis(2500);

/// What one node answers about the cluster.
pub(super) struct Observation {
    pub(super) info: String,
    pub(super) view: Vec<Entry>,
    pub(super) replication: String,
}

/// Asks the node on `port` for `CLUSTER INFO`, `CLUSTER NODES` and `INFO replication`.
pub(super) fn observe(access: &Access, port: u16) -> Result<Observation, String> {
    let (info, view, replication): (String, String, String) = on_node(access, port, |c| {
        redis::pipe()
            .cmd("CLUSTER")
            .arg("INFO")
            .cmd("CLUSTER")
            .arg("NODES")
            .cmd("INFO")
            .arg("replication")
            .query(c)
    })?;
    let view = parse_nodes(&view).map_err(|e| format!("port {port}: {e}"))?;
    Ok(Observation {
        info,
        view,
        replication,
    })
}

/// Runs `f` on a new blocking connection to the node on `port`, with bounded connect and
/// read times; errors name the port.
pub(super) fn on_node<T>(
    access: &Access,
    port: u16,
    f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
) -> Result<T, String> {
    let fail = |e: redis::RedisError| format!("port {port}: {e}");
    let client = access.client(port).map_err(fail)?;
    let mut conn = client
        .get_connection_with_timeout(Duration::from_secs(1))
        .map_err(fail)?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(fail)?;
    f(&mut conn).map_err(fail)
}

/// Polls [`check_settled`], then [`replicated`], until both hold or `timeout` passes;
/// answers the last reason.
pub(super) fn wait_settled(
    access: &Access,
    ports: &[u16],
    timeout: Duration,
) -> Result<Vec<ClusterNode>, String> {
    let deadline = Instant::now() + timeout;
    loop {
        match check_settled(access, ports).and_then(|view| replicated(access, &view).map(|()| view))
        {
            Ok(view) => return Ok(view),
            Err(e) if Instant::now() > deadline => {
                return Err(format!("still after {timeout:?}: {e}"));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// The cluster formed by the nodes on `ports` is settled when every one of them reports
/// `cluster_state:ok` with all slots ok, sees all the others as healthy and connected, and
/// agrees with the others on roles and slots; every slot is served by one of them; and each
/// is either a primary with slots or a replica of one of them whose sync is complete.
/// Answers the agreed view, or what does not hold yet.
pub(super) fn check_settled(access: &Access, ports: &[u16]) -> Result<Vec<ClusterNode>, String> {
    let observed = ports
        .iter()
        .map(|&p| observe(access, p).map(|o| (p, o)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ids = Vec::new();
    for (port, o) in &observed {
        let state = field(&o.info, "cluster_state");
        let slots_ok = field(&o.info, "cluster_slots_ok");
        if state != Some("ok") || slots_ok != Some("16384") {
            return Err(format!(
                "port {port}: cluster_state {state:?}, cluster_slots_ok {slots_ok:?}"
            ));
        }
        let me = o
            .view
            .iter()
            .find(|e| e.myself)
            .ok_or(format!("port {port} lists no myself"))?;
        ids.push(me.node.id.clone());
    }
    let mut agreed: Option<(u16, Vec<ClusterNode>)> = None;
    for (port, o) in &observed {
        for id in &ids {
            match o.view.iter().find(|e| &e.node.id == id) {
                Some(e) if !e.failed && e.connected => {}
                Some(e) => {
                    return Err(format!(
                        "port {port} sees {:?} as failed or unreachable",
                        e.node
                    ));
                }
                None => return Err(format!("port {port} does not know node {id} yet")),
            }
        }
        let view = ordered(o.view.iter().map(|e| e.node.clone()), ports);
        match &agreed {
            None => agreed = Some((*port, view)),
            Some((first, v)) if *v != view => {
                return Err(format!(
                    "ports {first} and {port} disagree: {v:?} vs {view:?}"
                ));
            }
            Some(_) => {}
        }
    }
    let view = agreed.map(|(_, v)| v).unwrap_or_default();
    let served: usize = view.iter().map(ClusterNode::slot_count).sum();
    if served != usize::from(SLOTS) {
        return Err(format!(
            "running primaries serve {served} of {SLOTS} slots: {view:?}"
        ));
    }
    for (port, o) in &observed {
        let Some(me) = view.iter().find(|n| n.port == *port) else {
            return Err(format!("port {port} is missing from the view"));
        };
        match &me.primary_id {
            None if me.slots.is_empty() => {
                return Err(format!(
                    "port {port} is a primary without slots, not yet a replica"
                ));
            }
            None => {}
            Some(primary) if !view.iter().any(|n| &n.id == primary) => {
                return Err(format!(
                    "port {port} replicates {primary}, which is not running"
                ));
            }
            Some(primary) => {
                let link = field(&o.replication, "master_link_status");
                let syncing = field(&o.replication, "master_sync_in_progress");
                if link != Some("up") || syncing != Some("0") {
                    return Err(format!(
                        "replica {port}: master_link_status {link:?}, master_sync_in_progress {syncing:?}"
                    ));
                }
                // The cluster's word and the replication link must name the same primary.
                let primary_port = view.iter().find(|n| &n.id == primary).map(|n| n.port);
                let master_port = field(&o.replication, "master_port");
                if master_port != primary_port.map(|p| p.to_string()).as_deref() {
                    return Err(format!(
                        "replica {port} replicates port {master_port:?}, the cluster says {primary_port:?}"
                    ));
                }
            }
        }
    }
    Ok(view)
}

/// Every replica in `view` acknowledges a write made through its primary: on one connection
/// to each primary with replicas, `SET` and `DEL` a key of a slot it serves, then `WAIT` for
/// all its replicas (at most [`REPLICATION_WAIT`]). `WAIT` counts acknowledgements of the
/// offset of the connection's own last write, so this proves that the replicas hold every
/// write the primary took before (replication is ordered) and that their stream flows.
///
/// `master_link_status:up` alone does not prove that: after a diskless sync, Redis marks
/// the replica online but starts streaming to it only on its next `REPLCONF ACK` (sent once
/// a second), so for up to a second writes pile up on the primary and are lost if it dies.
/// Nor does a `WAIT` on a connection that wrote nothing: it answers at once with the number
/// of replicas online, whatever they hold.
pub(super) fn replicated(access: &Access, view: &[ClusterNode]) -> Result<(), String> {
    for primary in view.iter().filter(|n| n.is_primary()) {
        let replicas = view
            .iter()
            .filter(|n| n.primary_id.as_ref() == Some(&primary.id))
            .count();
        if replicas == 0 {
            continue;
        }
        let key = sync_key(primary).ok_or(format!("port {} serves no slot", primary.port))?;
        let timeout = u64::try_from(REPLICATION_WAIT.as_millis()).unwrap_or(u64::MAX);
        let (acked,): (usize,) = on_node(access, primary.port, |c| {
            redis::pipe()
                .cmd("SET")
                .arg(&key)
                .arg(1)
                .ignore()
                .cmd("DEL")
                .arg(&key)
                .ignore()
                .cmd("WAIT")
                .arg(replicas)
                .arg(timeout)
                .query(c)
        })?;
        if acked < replicas {
            return Err(format!(
                "{acked} of the {replicas} replicas of port {} acknowledged a write within {REPLICATION_WAIT:?}",
                primary.port
            ));
        }
    }
    Ok(())
}

/// A key in a slot that `primary` serves, for [`replicated`]'s write.
fn sync_key(primary: &ClusterNode) -> Option<String> {
    (0..u32::from(SLOTS) * 8)
        .map(|i| format!("delayq-testkit:{{sync-{i}}}"))
        .find(|k| primary.serves(key_slot(k)))
}

/// The nodes among `running` ports, primaries first by their first slot, then replicas in
/// the order of their primaries.
pub(super) fn ordered(
    nodes: impl Iterator<Item = ClusterNode>,
    running: &[u16],
) -> Vec<ClusterNode> {
    let mut nodes: Vec<ClusterNode> = nodes.filter(|n| running.contains(&n.port)).collect();
    let first_slot = |n: &ClusterNode| n.slots.first().map_or(SLOTS, |r| *r.start());
    let rank = |n: &ClusterNode, all: &[ClusterNode]| match &n.primary_id {
        None => (0, first_slot(n), n.port),
        Some(p) => (
            1,
            all.iter().find(|q| &q.id == p).map_or(SLOTS, first_slot),
            n.port,
        ),
    };
    let all = nodes.clone();
    nodes.sort_by_key(|n| rank(n, &all));
    nodes
}
