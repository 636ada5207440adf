//! `Engine::unreachable`: which topics this process cannot reach now, read from the record
//! of unreachable cluster slots (`conn/per_slot.rs`) and the topics' partitions as this
//! process last read them. No call goes out: a reserve asks after every answer.

use std::sync::Arc;

use delayq_core::Topic;

use super::Ops;
use crate::keys::Part;

impl Ops {
    /// The topics of `topics`, in their order, any of whose partitions lies in a cluster
    /// slot skipped as unreachable now (`Conn::unreachable`: its primary, or another slot
    /// of its primary, did not answer in time lately). A topic's partitions are the ones
    /// this process last read (of any age: a count changes only while the topic is empty),
    /// or its home when it never read them. On one node, or while no slot is marked: none,
    /// after one lock.
    pub(crate) fn unreachable(&self, topics: &[Topic]) -> Vec<Topic> {
        if !self.conn.is_cluster() || !self.conn.some_unreachable() {
            return Vec::new();
        }
        let parts: Vec<Arc<[Part]>> = {
            let layouts = self.lock_layouts();
            topics
                .iter()
                .map(|t| match layouts.get(t) {
                    Some(l) => l.parts.clone(),
                    None => Part::all(t, 1),
                })
                .collect()
        };
        unreachable_topics(topics, &parts, |slot| self.conn.unreachable(slot))
    }
}

/// The topics of `topics` (each with its partitions at the same place in `parts`) one of
/// whose partitions lies in a slot `down` says is unreachable, in their order.
fn unreachable_topics(
    topics: &[Topic],
    parts: &[Arc<[Part]>],
    down: impl Fn(u16) -> bool,
) -> Vec<Topic> {
    topics
        .iter()
        .zip(parts)
        .filter(|(_, parts)| parts.iter().any(|p| down(p.slot())))
        .map(|(t, _)| t.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(s: &str) -> Topic {
        Topic::new(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_topic_is_unreachable_when_any_of_its_partitions_slots_is_issue_37() {
        // See: issue 37
        let (one, four, other) = (topic("one"), topic("four"), topic("other"));
        let topics = [one.clone(), four.clone(), other.clone()];
        let parts = [
            Part::all(&one, 1),
            Part::all(&four, 4),
            Part::all(&other, 1),
        ];
        let (one_slot, other_slot) = (parts[0][0].slot(), parts[2][0].slot());
        let four_slots: Vec<u16> = parts[1].iter().map(Part::slot).collect();
        // The partitions spread over the slot range, away from the others' slots.
        assert_eq!(four_slots.len(), 4);
        for s in &four_slots {
            assert!(*s != one_slot && *s != other_slot, "{four_slots:?}");
        }
        let down_at = |slots: Vec<u16>| unreachable_topics(&topics, &parts, |s| slots.contains(&s));

        assert_eq!(down_at(vec![]), Vec::<Topic>::new());
        assert_eq!(down_at(vec![one_slot]), vec![one.clone()]);
        // One partition of four is enough, whichever it is.
        for s in &four_slots {
            assert_eq!(down_at(vec![*s]), vec![four.clone()], "slot {s}");
        }
        // The partitioned topic's home holds its settings, not its jobs: a topic whose
        // partitions are known is not listed for its home.
        let home = Part::whole(&four).slot();
        if !four_slots.contains(&home) {
            assert_eq!(down_at(vec![home]), Vec::<Topic>::new());
        }
        // Several, in the order asked.
        assert_eq!(
            down_at(vec![other_slot, four_slots[2], one_slot]),
            vec![one, four, other]
        );
    }
}
