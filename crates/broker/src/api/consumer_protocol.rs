//! Kafka's consumer protocol: the subscription a member sends in JoinGroup and the
//! assignment its leader sends in SyncGroup, for groups of protocol type `consumer`.
//!
//! Both start with an i16 version that the crate's `decode` does not read; versions above 3
//! only append fields, so they are read as 3 (trailing bytes ignored).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use coordinator_core::TopicPartition;
use kafka_protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription};
use kafka_protocol::protocol::{Decodable, Encodable};

/// The protocol type of consumer groups.
pub(crate) const CONSUMER: &str = "consumer";

fn version(bytes: &mut Bytes) -> Option<i16> {
    (bytes.remaining() >= 2)
        .then(|| bytes.get_i16())
        .filter(|v| *v >= 0)
        .map(|v| v.min(3))
}

/// The topics of a subscription, or `None` if the bytes are not one.
pub(crate) fn subscription_topics(metadata: &Bytes) -> Option<Vec<String>> {
    let mut bytes = metadata.clone();
    let v = version(&mut bytes)?;
    let subscription = ConsumerProtocolSubscription::decode(&mut bytes, v).ok()?;
    Some(subscription.topics.iter().map(|t| t.to_string()).collect())
}

/// The partitions of an assignment (none for empty bytes), or `None` if the bytes are not
/// an assignment.
pub(crate) fn assignment_partitions(assignment: &Bytes) -> Option<Vec<TopicPartition>> {
    if assignment.is_empty() {
        return Some(Vec::new());
    }
    let mut bytes = assignment.clone();
    let v = version(&mut bytes)?;
    let decoded = ConsumerProtocolAssignment::decode(&mut bytes, v).ok()?;
    let mut partitions = Vec::new();
    for topic in &decoded.assigned_partitions {
        for &p in &topic.partitions {
            partitions.push(TopicPartition::new(
                topic.topic.as_str(),
                u32::try_from(p).ok()?,
            ));
        }
    }
    Some(partitions)
}

/// A valid, empty v0 assignment: `00 00 | 00 00 00 00 | ff ff ff ff` (version, no topics,
/// null user data). Sent instead of zero bytes, which consumer clients cannot decode.
pub(crate) fn empty_assignment() -> Bytes {
    let mut out = BytesMut::with_capacity(10);
    out.put_i16(0);
    // Encoding the default assignment at v0 cannot fail; the fallback is the same bytes.
    if ConsumerProtocolAssignment::default()
        .encode(&mut out, 0)
        .is_err()
    {
        out.truncate(2);
        out.put_i32(0);
        out.put_i32(-1);
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as WireTp;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;

    fn encoded<T: Encodable>(value: &T, version: i16) -> Bytes {
        let mut out = BytesMut::new();
        out.put_i16(version);
        value.encode(&mut out, version.min(3)).unwrap();
        out.freeze()
    }

    #[test]
    fn the_empty_assignment_is_kafkas_v0_bytes() {
        assert_eq!(
            &empty_assignment()[..],
            &[0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(assignment_partitions(&empty_assignment()), Some(Vec::new()));
    }

    #[test]
    fn subscriptions_and_assignments_decode_at_every_version() {
        for v in [0, 1, 3, 7] {
            let sub = ConsumerProtocolSubscription::default().with_topics(vec![
                StrBytes::from_static_str("a"),
                StrBytes::from_static_str("b"),
            ]);
            assert_eq!(
                subscription_topics(&encoded(&sub, v)),
                Some(vec!["a".to_string(), "b".to_string()]),
                "v{v}"
            );
            let a = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
                WireTp::default()
                    .with_topic(TopicName(StrBytes::from_static_str("a")))
                    .with_partitions(vec![0, 2]),
            ]);
            assert_eq!(
                assignment_partitions(&encoded(&a, v)),
                Some(vec![
                    TopicPartition::new("a", 0),
                    TopicPartition::new("a", 2)
                ])
            );
        }
    }

    #[test]
    fn other_bytes_are_not_mistaken_for_the_consumer_protocol() {
        for bad in [
            &b""[..],
            b"\x00",
            b"\xff\xff\x00",
            b"\x00\x00\x00\x00\x00\x09ab",
        ] {
            assert_eq!(
                subscription_topics(&Bytes::from_static(bad)),
                None,
                "{bad:?}"
            );
        }
        assert_eq!(
            assignment_partitions(&Bytes::from_static(b"\x00\x00\x00")),
            None
        );
        let negative =
            ConsumerProtocolAssignment::default().with_assigned_partitions(vec![WireTp::default()
                .with_topic(TopicName(StrBytes::from_static_str("a")))
                .with_partitions(vec![-1])]);
        assert_eq!(assignment_partitions(&encoded(&negative, 0)), None);
    }
}
