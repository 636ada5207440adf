//! The cluster as one node sees it: [`ClusterNode`] and the parser of `CLUSTER NODES`, plus
//! the `field:value` lines of `CLUSTER INFO` and `INFO`.

use std::ops::RangeInclusive;

/// A node of a [`crate::RedisCluster`] as the cluster describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNode {
    /// The node id the cluster knows it by (40 hex characters); it survives a restart.
    pub id: String,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// For a replica, the id of the primary it replicates; `None` for a primary.
    pub primary_id: Option<String>,
    /// The slots it serves, in order (none for a replica).
    pub slots: Vec<RangeInclusive<u16>>,
}

impl ClusterNode {
    /// True for a primary.
    pub fn is_primary(&self) -> bool {
        self.primary_id.is_none()
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// True when this node serves `slot`.
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|r| r.contains(&slot))
    }

    /// The first of `<name>-0`, `<name>-1`, … whose topic lives on this node: its keys
    /// under delayq's default prefix (`delayq:{<topic>}:…`) hash to a slot it serves. For
    /// tests that need a topic on a chosen primary.
    pub fn topic_named(&self, name: &str) -> String {
        assert!(
            !self.slots.is_empty(),
            "the node on port {} serves no slot (a replica?): no topic lives on it",
            self.port
        );
        (0u64..)
            .map(|n| format!("{name}-{n}"))
            .find(|t| self.serves(super::key_slot(format!("delayq:{{{t}}}:wake"))))
            .unwrap_or_else(|| unreachable!("a node serves no slot of any name"))
    }

    /// How many slots it serves.
    pub fn slot_count(&self) -> usize {
        self.slots.iter().map(|r| r.len()).sum()
    }
}

/// One line of `CLUSTER NODES`: the node, and what the answering node thinks of it.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) node: ClusterNode,
    /// This line describes the answering node itself.
    pub(crate) myself: bool,
    /// Flagged `fail`, `fail?`, `handshake` or `noaddr`: not (yet) a working member.
    pub(crate) failed: bool,
    /// The answering node's link to it is up (always true for `myself`).
    pub(crate) connected: bool,
}

/// Parses the answer of `CLUSTER NODES`. Slots being migrated or imported (`[slot->-id]`,
/// `[slot-<-id]`) are left out: their owner is the node listing them as a plain slot.
pub(crate) fn parse_nodes(text: &str) -> Result<Vec<Entry>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            parse_line(line).ok_or_else(|| format!("unexpected CLUSTER NODES line {line:?}"))
        })
        .collect()
}

fn parse_line(line: &str) -> Option<Entry> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 8 {
        return None;
    }
    // `ip:port@busport[,hostname]`; `:0@0` for a node without an address yet.
    let addr = fields[1].split('@').next()?;
    let port = addr.rsplit(':').next()?.parse().ok()?;
    let flags: Vec<&str> = fields[2].split(',').collect();
    let has = |f: &str| flags.contains(&f);
    let primary_id = (fields[3] != "-").then(|| fields[3].to_string());
    let mut slots = Vec::new();
    for token in &fields[8..] {
        if token.starts_with('[') {
            continue;
        }
        let (start, end) = token.split_once('-').unwrap_or((token, token));
        slots.push(start.parse().ok()?..=end.parse().ok()?);
    }
    slots.sort_by_key(|r| *r.start());
    Some(Entry {
        node: ClusterNode {
            id: fields[0].to_string(),
            port,
            primary_id: if has("slave") { primary_id } else { None },
            slots,
        },
        myself: has("myself"),
        failed: ["fail", "fail?", "handshake", "noaddr"]
            .iter()
            .any(|f| has(f)),
        connected: has("myself") || fields[7] == "connected",
    })
}

/// The value of `name` in an answer made of `name:value` lines (`CLUSTER INFO`, `INFO`).
pub(crate) fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        l.trim_end()
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(':'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002,host master - 0 1426238316232 2 connected 5461-10922 [10923->-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f]
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 master - 0 1426238318243 3 connected 10923-16383 [10923-<-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]
6ec23923021cf3ffec47632106199cb7f496ce01 127.0.0.1:30005@31005 master,fail - 1426238316232 0 5 disconnected
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 42 0-41 43-5460
";

    #[test]
    fn cluster_nodes_lines_parse_into_roles_slots_and_health() {
        let entries = parse_nodes(NODES).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(entries.len(), 5);
        let replica = &entries[0];
        assert_eq!(replica.node.port, 30004);
        assert_eq!(
            replica.node.primary_id.as_deref(),
            Some("e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca")
        );
        assert!(!replica.node.is_primary() && replica.node.slots.is_empty());
        // A migrating slot stays with its owner's plain range; the bracket is left out.
        assert_eq!(entries[1].node.slots, vec![5461..=10922]);
        assert_eq!(entries[1].node.port, 30002);
        assert_eq!(entries[2].node.slots, vec![10923..=16383]);
        assert!(entries[3].failed && !entries[3].connected);
        let me = &entries[4];
        assert!(me.myself && me.connected && !me.failed && me.node.is_primary());
        assert_eq!(me.node.slots, vec![0..=41, 42..=42, 43..=5460]);
        assert_eq!(me.node.slot_count(), 5461);
        assert!(me.node.serves(42) && !me.node.serves(5461));
        assert!(parse_nodes("garbage").is_err());
    }

    #[test]
    fn info_fields_are_found_by_exact_name() {
        let info = "cluster_state:ok\r\ncluster_slots_ok:16384\r\ncluster_slots_pfail:0\r\n";
        assert_eq!(field(info, "cluster_state"), Some("ok"));
        assert_eq!(field(info, "cluster_slots_ok"), Some("16384"));
        assert_eq!(field(info, "cluster_slots"), None);
    }
}
