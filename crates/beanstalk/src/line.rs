//! [`Lines`]: the reserves waiting on one tube, served in the order they began to wait.
//!
//! beanstalkd hands a job put on a tube to the connection that has waited longest on it. An
//! engine's waiting reserves make no such promise: on Redis, a push from this process wakes
//! one waiter at once and the wake-up signal that follows wakes another, and the two race to
//! the same job. So the single-tube reserves of this server that found nothing ready wait in
//! a line: only the one at its head waits on the engine; the next begins when the head got a
//! job, timed out, answered `DEADLINE_SOON` or went away. The line is a fair
//! [`tokio::sync::Mutex`] (its waiters are served first come, first served), one per tube
//! with someone in it; a tube whose line empties leaves the map.
//!
//! What it does not order: reserves over several watched tubes (they look for the most
//! urgent job and wait on all the tubes at once), reserves on other servers sharing the
//! engine, and a reserve that arrives just as a job is put, whose first look may take the
//! job before the head's wait sees it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use delayq_core::Topic;
use tokio::sync::OwnedMutexGuard;

type Line = Arc<tokio::sync::Mutex<()>>;

/// The lines of one server's tubes.
#[derive(Default)]
pub(crate) struct Lines {
    lines: Mutex<HashMap<Topic, Line>>,
}

/// The head of a tube's line: while it lives, no other reserve of this server waits on the
/// tube's topic. Dropping it lets the next one in.
pub(crate) struct Head<'a> {
    // Declared first, so dropped first: the next in line is let in before the ticket checks
    // whether the line emptied.
    _guard: OwnedMutexGuard<()>,
    _ticket: Ticket<'a>,
}

/// A place in (or at the head of) a tube's line; the line leaves the map with its last
/// ticket. It holds no reference to the line itself: the future waiting for the lock, then
/// the guard, does, and both are dropped before the ticket.
struct Ticket<'a> {
    lines: &'a Lines,
    topic: Topic,
}

impl Lines {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Topic, Line>> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Joins `topic`'s line and resolves once this reserve is at its head. Dropping the
    /// future leaves the line.
    pub(crate) async fn wait_turn(&self, topic: &Topic) -> Head<'_> {
        let line = self.lock().entry(topic.clone()).or_default().clone();
        let ticket = Ticket {
            lines: self,
            topic: topic.clone(),
        };
        Head {
            _guard: line.lock_owned().await,
            _ticket: ticket,
        }
    }

    /// How many tubes have a line (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let mut lines = self.lines.lock();
        // Only the map's own reference left: no one waits in this line any more.
        if lines
            .get(&self.topic)
            .is_some_and(|l| Arc::strong_count(l) == 1)
        {
            lines.remove(&self.topic);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn topic(name: &str) -> Topic {
        Topic::new(name).expect("a valid topic")
    }

    /// Reserves reach the head in the order they joined, whatever order they are polled in,
    /// and one that leaves before its turn neither blocks nor takes a turn.
    #[tokio::test]
    async fn heads_come_in_arrival_order() {
        let lines = Arc::new(Lines::default());
        let t = topic("a");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let first = lines.wait_turn(&t).await;
        let mut tasks = Vec::new();
        for k in 1..=4 {
            let (lines, t, tx) = (lines.clone(), t.clone(), tx.clone());
            tasks.push(tokio::spawn(async move {
                let _head = lines.wait_turn(&t).await;
                let _ = tx.send(k);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }));
            // Each joins the line before the next is started.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The second to join after the head leaves before its turn.
        tasks[1].abort();
        drop(first);
        for task in tasks {
            let _ = task.await;
        }
        drop(tx);
        let mut order = Vec::new();
        while let Some(k) = rx.recv().await {
            order.push(k);
        }
        assert_eq!(order, vec![1, 3, 4]);
        assert_eq!(lines.len(), 0, "an empty line leaves the map");
    }

    /// A reserve that leaves while it waits, last in its line, takes the line out of the
    /// map with it: the ticket is dropped after the future that waited for the lock.
    #[tokio::test]
    async fn the_last_to_leave_while_waiting_empties_the_line() {
        let lines = Arc::new(Lines::default());
        let t = topic("a");
        let head = lines.wait_turn(&t).await;
        let waiting = {
            let (lines, t) = (lines.clone(), t.clone());
            tokio::spawn(async move {
                let _head = lines.wait_turn(&t).await;
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(head);
        waiting.abort();
        let _ = waiting.await;
        assert_eq!(lines.len(), 0, "a line nobody waits in stayed in the map");
    }

    /// Lines of different tubes do not wait for each other.
    #[tokio::test]
    async fn tubes_have_lines_of_their_own() {
        let lines = Lines::default();
        let _a = lines.wait_turn(&topic("a")).await;
        let b = tokio::time::timeout(Duration::from_secs(5), lines.wait_turn(&topic("b"))).await;
        assert!(b.is_ok(), "tube b's line waited for tube a's");
        drop(b);
        assert_eq!(lines.len(), 1);
    }
}
