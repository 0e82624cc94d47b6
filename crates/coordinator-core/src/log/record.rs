//! Records as a consumer sees them, and records as a producer hands them to a log.

use std::fmt;
use std::sync::Arc;

use crate::types::TopicPartition;

/// An immutable byte string. An `Arc<[u8]>`, so handing the same record to many consumers
/// copies a pointer, not the payload.
pub type Bytes = Arc<[u8]>;

/// A record header: a key and a byte value, as in Kafka.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Header {
    /// The header's name. Kafka allows duplicates; order is kept.
    pub key: Arc<str>,
    /// The header's value.
    pub value: Bytes,
}

impl Header {
    /// A header from anything string-like and anything byte-like.
    pub fn new(key: impl Into<Arc<str>>, value: impl Into<Bytes>) -> Self {
        Header {
            key: key.into(),
            value: value.into(),
        }
    }
}

impl fmt::Debug for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.key, ShowBytes(&self.value))
    }
}

/// A record read from a partition.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Record {
    /// The topic the record was read from.
    pub topic: Arc<str>,
    /// The partition the record was read from.
    pub partition: u32,
    /// The record's offset in its partition.
    pub offset: i64,
    /// The key, if the producer gave one.
    pub key: Option<Bytes>,
    /// The value.
    pub value: Bytes,
    /// Milliseconds since the epoch of the log's clock (Kafka's record timestamp).
    pub timestamp: i64,
    /// Headers, in the order the producer gave them.
    pub headers: Vec<Header>,
}

impl Record {
    /// The partition the record belongs to.
    pub fn topic_partition(&self) -> TopicPartition {
        TopicPartition::new(self.topic.clone(), self.partition)
    }
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Record");
        s.field(
            "at",
            &format_args!("{}-{}@{}", self.topic, self.partition, self.offset),
        );
        if let Some(key) = &self.key {
            s.field("key", &ShowBytes(key));
        }
        s.field("value", &ShowBytes(&self.value))
            .field("timestamp", &self.timestamp);
        if !self.headers.is_empty() {
            s.field("headers", &self.headers);
        }
        s.finish()
    }
}

/// A record to append: what a producer supplies. The log assigns the offset, and the
/// timestamp too unless one is given.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NewRecord {
    /// The key, if any.
    pub key: Option<Bytes>,
    /// The value.
    pub value: Bytes,
    /// A producer-chosen timestamp; `None` lets the log stamp its clock's time.
    pub timestamp: Option<i64>,
    /// Headers, in order.
    pub headers: Vec<Header>,
}

impl NewRecord {
    /// A record with this value, no key, no headers, stamped by the log.
    pub fn new(value: impl Into<Bytes>) -> Self {
        NewRecord {
            value: value.into(),
            ..NewRecord::default()
        }
    }

    /// Sets the key.
    #[must_use]
    pub fn key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the timestamp instead of letting the log stamp it.
    #[must_use]
    pub fn timestamp(mut self, ms: i64) -> Self {
        self.timestamp = Some(ms);
        self
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, key: impl Into<Arc<str>>, value: impl Into<Bytes>) -> Self {
        self.headers.push(Header::new(key, value));
        self
    }
}

impl From<&str> for NewRecord {
    fn from(value: &str) -> Self {
        NewRecord::new(value.as_bytes())
    }
}

impl From<String> for NewRecord {
    fn from(value: String) -> Self {
        NewRecord::new(value.into_bytes())
    }
}

/// Shows bytes as text when they are UTF-8 (the common case in labs), as hex otherwise.
struct ShowBytes<'a>(&'a [u8]);

impl fmt::Display for ShowBytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::str::from_utf8(self.0) {
            Ok(text) => write!(f, "{text:?}"),
            Err(_) => {
                f.write_str("0x")?;
                self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
            }
        }
    }
}

impl fmt::Debug for ShowBytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_record_builder_keeps_every_field() {
        let r = NewRecord::new(&b"v"[..])
            .key(&b"k"[..])
            .timestamp(7)
            .header("h", &b"1"[..])
            .header("h", &b"2"[..]);
        assert_eq!(&*r.value, b"v");
        assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(r.timestamp, Some(7));
        let values: Vec<&[u8]> = r.headers.iter().map(|h| &*h.value).collect();
        assert_eq!(
            values,
            [&b"1"[..], &b"2"[..]],
            "duplicate header keys keep their order"
        );
    }

    #[test]
    fn debug_shows_text_or_hex() {
        let r = Record {
            topic: "orders".into(),
            partition: 2,
            offset: 5,
            key: Some(Arc::from(&[0xffu8, 0x00][..])),
            value: Arc::from(&b"hello"[..]),
            timestamp: 1,
            headers: Vec::new(),
        };
        let shown = format!("{r:?}");
        assert!(shown.contains("orders-2@5"), "{shown}");
        assert!(shown.contains("0xff00"), "{shown}");
        assert!(shown.contains("\"hello\""), "{shown}");
        assert_eq!(r.topic_partition(), TopicPartition::new("orders", 2));
    }
}
