//! The worker acks through [`delayq_core::ack_batcher`]: the acks of its concurrent
//! deliveries share `ack_batch` round trips. This module holds its test against the fake
//! engine, which counts the round trips.

#[cfg(test)]
mod tests {
    use crate::fake::FakeEngine;
    use delayq_core::{JobId, Lease, LeaseToken, ack_batcher, run_acks};

    #[tokio::test]
    async fn concurrent_acks_share_round_trips() {
        let engine = FakeEngine::default();
        let (acker, acks) = ack_batcher();
        let acker = std::sync::Arc::new(acker);
        let leases: Vec<Lease> = (0..20)
            .map(|i| Lease {
                topic: FakeEngine::topic(),
                id: JobId::new(format!("j{i}")).unwrap_or_else(|e| panic!("{e}")),
                token: LeaseToken(1),
            })
            .collect();
        let all = futures_util::future::join_all(leases.iter().map(|l| {
            let acker = acker.clone();
            let l = l.clone();
            async move { acker.ack(&l).await }
        }));
        let results = tokio::select! {
            results = all => results,
            () = run_acks(&engine, acks) => panic!("the acker stops only when every sender is gone"),
        };
        assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
        let calls = engine.calls();
        assert_eq!(calls.acks.len(), 20);
        assert!(
            calls.ack_batches < 20,
            "{} round trips for 20 concurrent acks",
            calls.ack_batches
        );
    }
}
