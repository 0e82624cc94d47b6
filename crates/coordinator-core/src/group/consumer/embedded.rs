//! Kafka's embedded consumer protocol (`ConsumerProtocolSubscription` and
//! `ConsumerProtocolAssignment`), read and written where Kafka's coordinator reads and writes
//! it: when a classic group of protocol type `consumer` becomes a consumer-protocol group, when
//! a classic member joins such a group (its subscription and owned partitions), and when it
//! syncs (its assignment, at its own version). Pure byte work, no I/O.
//!
//! Layouts (big-endian, Kafka's non-flexible encoding, after an i16 version; versions above
//! 3 only append fields, so they are read as 3 and the rest ignored):
//! - subscription: topics `[string]`, user data `bytes?`; v1+: owned partitions
//!   `[(string, [i32])]`; v2+: generation `i32`; v3+: rack `string?`.
//! - assignment: partitions `[(string, [i32])]`, user data `bytes?` (the same at every version).

use std::collections::BTreeSet;

use crate::types::TopicPartition;

/// A member's decoded subscription.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Subscription {
    pub(crate) version: i16,
    pub(crate) topics: Vec<String>,
    pub(crate) owned: Vec<TopicPartition>,
    pub(crate) rack: Option<String>,
}

/// Why bytes are not the embedded consumer protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Malformed;

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.bytes.len() < n {
            return Err(Malformed);
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16, Malformed> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, Malformed> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A length-prefixed string; `None` for Kafka's null (−1).
    fn string(&mut self) -> Result<Option<String>, Malformed> {
        let len = self.i16()?;
        if len < 0 {
            return if len == -1 { Ok(None) } else { Err(Malformed) };
        }
        let b = self.take(len as usize)?;
        std::str::from_utf8(b)
            .map(|s| Some(s.to_string()))
            .map_err(|_| Malformed)
    }

    fn required_string(&mut self) -> Result<String, Malformed> {
        self.string()?.ok_or(Malformed)
    }

    fn skip_bytes(&mut self) -> Result<(), Malformed> {
        let len = self.i32()?;
        if len < -1 {
            return Err(Malformed);
        }
        if len > 0 {
            self.take(len as usize)?;
        }
        Ok(())
    }

    /// An array length: at most what the remaining bytes can hold at `min` bytes each.
    fn count(&mut self, min: usize) -> Result<usize, Malformed> {
        let n = self.i32()?;
        let n = usize::try_from(n).map_err(|_| Malformed)?;
        if n.saturating_mul(min) > self.bytes.len() {
            return Err(Malformed);
        }
        Ok(n)
    }

    fn partitions(&mut self) -> Result<Vec<TopicPartition>, Malformed> {
        let topics = self.count(6)?;
        let mut out = Vec::new();
        for _ in 0..topics {
            let topic = self.required_string()?;
            let n = self.count(4)?;
            for _ in 0..n {
                let p = u32::try_from(self.i32()?).map_err(|_| Malformed)?;
                out.push(TopicPartition::new(topic.as_str(), p));
            }
        }
        Ok(out)
    }
}

fn version(r: &mut Reader<'_>) -> Result<i16, Malformed> {
    let v = r.i16()?;
    if v < 0 {
        return Err(Malformed);
    }
    Ok(v)
}

/// Decodes a `ConsumerProtocolSubscription` (Kafka's `deserializeConsumerProtocolSubscription`).
pub(crate) fn decode_subscription(bytes: &[u8]) -> Result<Subscription, Malformed> {
    let mut r = Reader { bytes };
    let v = version(&mut r)?;
    let n = r.count(2)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        topics.push(r.required_string()?);
    }
    r.skip_bytes()?;
    let mut sub = Subscription {
        version: v,
        topics,
        ..Subscription::default()
    };
    if v >= 1 {
        sub.owned = r.partitions()?;
    }
    if v >= 2 {
        r.i32()?;
    }
    if v >= 3 {
        sub.rack = r.string()?;
    }
    Ok(sub)
}

/// Decodes a `ConsumerProtocolAssignment`'s partitions. Empty bytes (a member that has not
/// synced since it joined) are no assignment, as in Kafka.
pub(crate) fn decode_assignment(bytes: &[u8]) -> Result<Vec<TopicPartition>, Malformed> {
    let mut r = Reader { bytes };
    version(&mut r)?;
    let partitions = r.partitions()?;
    r.skip_bytes()?;
    Ok(partitions)
}

/// The version a subscription's bytes start with (Kafka's `ConsumerProtocol.deserializeVersion`);
/// 0 for bytes too short to say.
pub(crate) fn version_of(bytes: &[u8]) -> i16 {
    match bytes {
        [a, b, ..] => i16::from_be_bytes([*a, *b]).max(0),
        _ => 0,
    }
}

/// Encodes `partitions` as a `ConsumerProtocolAssignment` at `version` (Kafka's
/// `serializeAssignment`), with null user data. Topics whose names do not fit Kafka's i16
/// length are left out (no topic name is that long).
pub(crate) fn encode_assignment<'a>(
    partitions: impl IntoIterator<Item = &'a TopicPartition>,
    version: i16,
) -> Vec<u8> {
    let sorted: BTreeSet<&TopicPartition> = partitions.into_iter().collect();
    let mut topics: Vec<(&str, Vec<u32>)> = Vec::new();
    for tp in sorted {
        if i16::try_from(tp.topic().len()).is_err() {
            continue;
        }
        match topics.last_mut() {
            Some((t, ps)) if *t == tp.topic() => ps.push(tp.partition()),
            _ => topics.push((tp.topic(), vec![tp.partition()])),
        }
    }
    let mut out = Vec::with_capacity(10 + topics.len() * 16);
    out.extend_from_slice(&version.max(0).to_be_bytes());
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for (topic, ps) in &topics {
        out.extend_from_slice(&(topic.len() as i16).to_be_bytes());
        out.extend_from_slice(topic.as_bytes());
        out.extend_from_slice(&(ps.len() as i32).to_be_bytes());
        for p in ps {
            out.extend_from_slice(&(*p as i32).to_be_bytes());
        }
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out
}

/// Encodes a subscription (for tests and for the classic members a downgrade makes).
#[cfg(test)]
pub(crate) fn encode_subscription(sub: &Subscription) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&sub.version.to_be_bytes());
    out.extend_from_slice(&(sub.topics.len() as i32).to_be_bytes());
    for t in &sub.topics {
        out.extend_from_slice(&(t.len() as i16).to_be_bytes());
        out.extend_from_slice(t.as_bytes());
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    if sub.version >= 1 {
        let a = encode_assignment(&sub.owned, 0);
        // The assignment's partition array, without its version and user data.
        out.extend_from_slice(&a[2..a.len() - 4]);
    }
    if sub.version >= 2 {
        out.extend_from_slice(&(-1i32).to_be_bytes());
    }
    if sub.version >= 3 {
        match &sub.rack {
            Some(r) => {
                out.extend_from_slice(&(r.len() as i16).to_be_bytes());
                out.extend_from_slice(r.as_bytes());
            }
            None => out.extend_from_slice(&(-1i16).to_be_bytes()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(t: &str, p: u32) -> TopicPartition {
        TopicPartition::new(t, p)
    }

    #[test]
    fn subscriptions_round_trip_at_every_version() {
        for v in 0..=3 {
            let sub = Subscription {
                version: v,
                topics: vec!["a".into(), "b".into()],
                owned: if v >= 1 {
                    vec![tp("a", 0), tp("a", 2), tp("b", 1)]
                } else {
                    Vec::new()
                },
                rack: (v >= 3).then(|| "r1".to_string()),
            };
            assert_eq!(
                decode_subscription(&encode_subscription(&sub)),
                Ok(sub),
                "v{v}"
            );
        }
    }

    #[test]
    fn assignments_round_trip_and_keep_the_version() {
        let parts = [tp("b", 1), tp("a", 2), tp("a", 0)];
        let bytes = encode_assignment(&parts, 3);
        assert_eq!(version_of(&bytes), 3);
        assert_eq!(
            decode_assignment(&bytes),
            Ok(vec![tp("a", 0), tp("a", 2), tp("b", 1)])
        );
        // Kafka's empty v0 assignment.
        assert_eq!(
            encode_assignment(&[], 0),
            vec![0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(decode_assignment(&[]), Err(Malformed));
    }

    #[test]
    fn malformed_bytes_are_refused_not_panicked_on() {
        for bad in [
            &b""[..],
            b"\x00",
            b"\xff\xff\x00\x00\x00\x00",
            b"\x00\x00\x00\x00\x00\x09ab",
            b"\x00\x00\x7f\xff\xff\xff",
            b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x01\x00\x01a\x00\x00\x00\x01\xff\xff\xff\xff",
        ] {
            assert_eq!(decode_subscription(bad), Err(Malformed), "{bad:?}");
        }
        assert_eq!(decode_assignment(b"\x00\x00\x00"), Err(Malformed));
    }
}
