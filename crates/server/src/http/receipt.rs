//! Receipts: one opaque string per delivery that names its lease (topic, id and token), so a
//! client can answer for a delivery with that string alone.
//!
//! A receipt is the unpadded base64url of a small layout:
//!
//! | bytes | what |
//! |---|---|
//! | 1 | the layout version (`1`) in the high 4 bits, the token's length n (0 to 8) in the low 4 |
//! | n | the lease token, big-endian, without its leading zero bytes |
//! | 1 | the topic's length in bytes (at most 200) |
//! | that many | the topic |
//! | the rest | the job id (1 to 200 bytes) |
//!
//! Tokens are at least the store's clock in µs (so they survive lost writes), seven bytes:
//! the receipt of job `order-42` of topic `orders` is 31 characters.
//!
//! It is not signed: it carries nothing a client could not send in the `topic`, `id` and
//! `token` form, and the token is what fences a stale delivery.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use delayq_core::{JobId, Lease, LeaseToken, Topic};

use super::error::ApiError;

const VERSION: u8 = 1;

/// The receipt of a lease.
pub fn encode(lease: &Lease) -> String {
    let (topic, id) = (
        lease.topic.as_str().as_bytes(),
        lease.id.as_str().as_bytes(),
    );
    let token = lease.token.0.to_be_bytes();
    let token = &token[(lease.token.0.leading_zeros() / 8) as usize..];
    let mut raw = Vec::with_capacity(2 + token.len() + topic.len() + id.len());
    raw.push(VERSION << 4 | token.len() as u8);
    raw.extend_from_slice(token);
    // Topics are at most 200 bytes (MAX_TOPIC_LEN), so the length fits in one byte.
    raw.push(topic.len() as u8);
    raw.extend_from_slice(topic);
    raw.extend_from_slice(id);
    URL_SAFE_NO_PAD.encode(raw)
}

/// The lease a receipt names; 400 `invalid_receipt` when it is not one this server hands out.
/// The caller adds the field's pointer.
pub fn decode(receipt: &str) -> Result<Lease, ApiError> {
    let bad = |why: &str| {
        ApiError::invalid_receipt(format!(
            "not a receipt: {why}; pass the \"receipt\" string of a delivery unchanged"
        ))
    };
    let raw = URL_SAFE_NO_PAD
        .decode(receipt.as_bytes())
        .map_err(|_| bad("it is not unpadded base64url"))?;
    let Some((&head, rest)) = raw.split_first() else {
        return Err(bad("it is empty"));
    };
    let token_len = usize::from(head & 0x0f);
    if head >> 4 != VERSION || token_len > 8 {
        return Err(bad("its layout is not one this server writes"));
    }
    let too_short = || bad("it is too short");
    let (token, rest) = rest.split_at_checked(token_len).ok_or_else(too_short)?;
    let (&topic_len, rest) = rest.split_first().ok_or_else(too_short)?;
    let (topic, id) = rest
        .split_at_checked(usize::from(topic_len))
        .ok_or_else(too_short)?;
    let (Ok(topic), Ok(id)) = (std::str::from_utf8(topic), std::str::from_utf8(id)) else {
        return Err(bad("its topic or id is not text"));
    };
    let topic = Topic::new(topic).map_err(|_| bad("its topic is not a topic name"))?;
    let id = JobId::new(id).map_err(|_| bad("its job id is not a job id"))?;
    let token = token.iter().fold(0u64, |t, &b| t << 8 | u64::from(b));
    Ok(Lease {
        topic,
        id,
        token: LeaseToken(token),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(topic: &str, id: &str, token: u64) -> Lease {
        Lease {
            topic: Topic::new(topic).unwrap_or_else(|e| panic!("{e}")),
            id: JobId::new(id).unwrap_or_else(|e| panic!("{e}")),
            token: LeaseToken(token),
        }
    }

    #[test]
    fn receipts_round_trip() {
        let long_topic = "t".repeat(200);
        let long_id = "~".repeat(200);
        for l in [
            lease("orders", "order-42", 2),
            lease("a", "b/c?d", u64::MAX),
            lease("a", "b", 256),
            lease(&long_topic, &long_id, 0),
        ] {
            let r = encode(&l);
            assert!(
                r.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{r} needs escaping in a URL or JSON"
            );
            assert_eq!(decode(&r).ok(), Some(l));
        }
        assert_eq!(
            encode(&lease("orders", "order-42", 2)),
            "EQIGb3JkZXJzb3JkZXItNDI"
        );
    }

    #[test]
    fn bad_receipts_are_invalid_receipt() {
        let good = encode(&lease("orders", "order-42", 2));
        let raw = URL_SAFE_NO_PAD.decode(&good).unwrap_or_default();
        let with = |i: usize, b: u8| {
            let mut raw = raw.clone();
            raw[i] = b;
            URL_SAFE_NO_PAD.encode(raw)
        };
        for r in [
            String::new(),
            "not a receipt!".into(),
            good[..3].to_string(),
            with(0, 0x21),  // another layout version
            with(0, 0x19),  // a token of 9 bytes
            with(2, 200),   // a topic longer than the rest
            with(2, 14),    // no id left
            with(3, b' '),  // a space in the topic
            with(10, b' '), // a space in the id
        ] {
            let e = decode(&r).err().unwrap_or_else(|| panic!("{r} decoded"));
            assert_eq!(e.code(), "invalid_receipt", "{r}: {}", e.message());
        }
    }
}

/// Fuzzed receipts (issue 17): any string is a lease or `invalid_receipt`, never a panic;
/// any lease's receipt decodes to it.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: delayq_testkit::fuzz_cases(512), failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn any_string_is_a_lease_or_invalid_receipt(
            s in prop_oneof![
                any::<String>(),
                prop::collection::vec(any::<u8>(), 0..300).prop_map(|b| URL_SAFE_NO_PAD.encode(b)),
                (0u8..=255, prop::collection::vec(any::<u8>(), 0..40)).prop_map(|(h, b)| {
                    URL_SAFE_NO_PAD.encode([&[h][..], &b].concat())
                }),
            ]
        ) {
            if let Err(e) = decode(&s) {
                prop_assert_eq!(e.code(), "invalid_receipt");
            }
        }

        #[test]
        fn every_lease_round_trips(topic in "[A-Za-z0-9_.:-]{1,200}", id in "[!-~]{1,200}", token in any::<u64>()) {
            // `.` and `..` are not job ids (a URL path cannot name them).
            prop_assume!(id != "." && id != "..");
            let lease = Lease {
                topic: Topic::new(topic).unwrap(),
                id: JobId::new(id).unwrap(),
                token: LeaseToken(token),
            };
            prop_assert_eq!(decode(&encode(&lease)).ok(), Some(lease));
        }
    }
}
