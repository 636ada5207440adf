//! Which of the 16384 hash slots a key lives in, computed as Redis Cluster does: CRC16
//! (XMODEM) of the key's hash tag, or of the whole key when it has none, modulo 16384.

/// The number of hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// The hash slot of `key`, as `CLUSTER KEYSLOT` answers it.
///
/// Only the hash tag counts when the key has one: the bytes between the first `{` and the
/// first `}` after it, if there is at least one byte between them. So `delayq:{orders}:ready`
/// and `delayq:{orders}:jobs` share a slot, while `a{}b` hashes as a whole.
pub fn key_slot(key: impl AsRef<[u8]>) -> u16 {
    let key = key.as_ref();
    let hashed = hash_tag(key).unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(hashed) % SLOTS
}

/// The hash tag of `key`, if it has a non-empty one.
fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let rest = &key[open + 1..];
    let close = rest.iter().position(|&b| b == b'}')?;
    (close > 0).then(|| &rest[..close])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_is_the_xmodem_variant_redis_documents() {
        // The cluster specification's check value: CRC16 of "123456789" is 0x31C3.
        assert_eq!(key_slot("123456789"), 0x31C3);
    }

    #[test]
    fn hash_tags_follow_the_cluster_specification() {
        // The examples of the Redis Cluster specification, "Hash tags".
        assert_eq!(
            key_slot("{user1000}.following"),
            key_slot("{user1000}.followers")
        );
        assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
        assert_eq!(key_slot("foo{{bar}}zap"), key_slot("{bar"));
        assert_eq!(key_slot("foo{bar}{zap}"), key_slot("bar"));
        assert_eq!(hash_tag(b"foo{}{bar}"), None);
        assert_eq!(hash_tag(b"foo}{bar"), None);
        assert_eq!(hash_tag(b"foo{bar"), None);
        assert_eq!(hash_tag(b"delayq:{orders}:ready"), Some(&b"orders"[..]));
    }

    #[test]
    fn every_key_lands_in_a_slot() {
        for key in ["", "{", "}", "{}", "a", "\u{fffd}\u{1F600}"] {
            assert!(key_slot(key) < SLOTS, "{key:?}");
        }
    }
}
