//! The writer of the version-1 file format.
//!
//! Hand-written rather than derived through serde because it is on the commit path: it
//! formats integers with a two-digits-at-a-time table, copies strings that need no escaping
//! in one `memcpy`, and appends into a caller-owned buffer so a commit allocates nothing per
//! entry. Its output is byte-for-byte what `serde_json::to_vec` gives for the same document
//! (sorted keys, compact, the same string escapes); the tests check that.

use std::cmp::Ordering;
use std::iter::Peekable;

use coordinator_core::TopicPartition;

/// Everything before the first group.
pub(crate) const FILE_PREFIX: &[u8] = b"{\"groups\":{";
/// Everything after the last group.
pub(crate) const FILE_SUFFIX: &[u8] = b"},\"version\":1}";

/// Appends one group as it appears inside `"groups":{…}`:
/// `"<group>":[{"offset":N,"partition":P,"topic":"T"},…]`. `entries` must be sorted.
pub(crate) fn encode_group<'a>(
    out: &mut Vec<u8>,
    group: &str,
    entries: impl IntoIterator<Item = (&'a TopicPartition, i64)>,
) {
    push_str(out, group);
    out.extend_from_slice(b":[");
    for (i, (tp, offset)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"offset\":");
        push_i64(out, offset);
        out.extend_from_slice(b",\"partition\":");
        push_u64(out, u64::from(tp.partition()));
        out.extend_from_slice(b",\"topic\":");
        push_str(out, tp.topic());
        out.push(b'}');
    }
    out.push(b']');
}

/// Appends a whole file: the prefix, the already encoded groups separated by commas, the
/// suffix. `groups` must be sorted by group id.
pub(crate) fn encode_file<'a>(out: &mut Vec<u8>, groups: impl IntoIterator<Item = &'a [u8]>) {
    out.extend_from_slice(FILE_PREFIX);
    for (i, group) in groups.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(group);
    }
    out.extend_from_slice(FILE_SUFFIX);
}

/// Merges two iterators sorted by key into one, sorted; on equal keys the item of `newer`
/// wins. This is how a commit's offsets are laid over the stored ones without building the
/// merged map.
pub(crate) fn merge_newer<K: Ord, V, A, B>(older: A, newer: B) -> MergeNewer<A, B>
where
    A: Iterator<Item = (K, V)>,
    B: Iterator<Item = (K, V)>,
{
    MergeNewer {
        older: older.peekable(),
        newer: newer.peekable(),
    }
}

/// The iterator of [`merge_newer`].
pub(crate) struct MergeNewer<A: Iterator, B: Iterator> {
    older: Peekable<A>,
    newer: Peekable<B>,
}

impl<K: Ord, V, A, B> Iterator for MergeNewer<A, B>
where
    A: Iterator<Item = (K, V)>,
    B: Iterator<Item = (K, V)>,
{
    type Item = (K, V);

    fn next(&mut self) -> Option<(K, V)> {
        let order = match (self.older.peek(), self.newer.peek()) {
            (Some((a, _)), Some((b, _))) => a.cmp(b),
            (Some(_), None) => Ordering::Less,
            (None, _) => Ordering::Greater,
        };
        match order {
            Ordering::Less => self.older.next(),
            Ordering::Greater => self.newer.next(),
            Ordering::Equal => {
                self.older.next();
                self.newer.next()
            }
        }
    }
}

/// "00", "01", …, "99": two digits per division.
const DIGIT_PAIRS: [u8; 200] = {
    let mut table = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        table[2 * i] = b'0' + (i / 10) as u8;
        table[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    table
};

fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        at -= 2;
        buf[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        buf[at] = b'0' + n as u8;
    }
    out.extend_from_slice(&buf[at..]);
}

fn push_i64(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    push_u64(out, n.unsigned_abs());
}

/// Appends `s` as a JSON string, escaped exactly as serde_json escapes it: `"` and `\`
/// backslashed, `\b \t \n \f \r` short, other control characters as `\u00XX` with lowercase
/// hex, everything else (DEL and non-ASCII included) as is.
fn push_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut copied = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            0x0c => b"\\f",
            b'\r' => b"\\r",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[copied..i]);
        if short.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.extend_from_slice(short);
        }
        copied = i + 1;
    }
    out.extend_from_slice(&bytes[copied..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn string(s: &str) -> String {
        let mut out = Vec::new();
        push_str(&mut out, s);
        String::from_utf8(out).unwrap_or_default()
    }

    fn integer(n: i64) -> String {
        let mut out = Vec::new();
        push_i64(&mut out, n);
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn integers_at_every_width_and_boundary() {
        let mut samples = vec![0, 1, 9, 10, 99, 100, 101, i64::MAX, i64::MIN, -1, -10];
        let mut p: i64 = 1;
        while let Some(next) = p.checked_mul(10) {
            samples.extend([p - 1, p, p + 1]);
            p = next;
        }
        for n in samples {
            assert_eq!(integer(n), n.to_string());
        }
        let mut out = Vec::new();
        push_u64(&mut out, u64::MAX);
        assert_eq!(out, u64::MAX.to_string().as_bytes());
    }

    #[test]
    fn every_ascii_character_is_escaped_like_serde_json() {
        for c in (0u8..=0x7f).map(char::from) {
            let s = format!("a{c}b");
            assert_eq!(
                string(&s),
                serde_json::to_string(&s).unwrap_or_default(),
                "{c:?}"
            );
        }
        assert_eq!(string("\u{1f}"), "\"\\u001f\"");
        assert_eq!(string("ünïcødé ☃ \u{10ffff}"), "\"ünïcødé ☃ \u{10ffff}\"");
    }

    #[test]
    fn a_file_is_the_documented_compact_sorted_format() {
        let t0 = TopicPartition::new("audit", 3);
        let t1 = TopicPartition::new("orders", 0);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        encode_group(&mut a, "a", [(&t0, 0), (&t1, 12)]);
        encode_group(&mut b, "b\"", [(&t1, 7)]);
        let mut file = Vec::new();
        encode_file(&mut file, [a.as_slice(), b.as_slice()]);
        assert_eq!(
            String::from_utf8(file).unwrap_or_default(),
            r#"{"groups":{"a":[{"offset":0,"partition":3,"topic":"audit"},{"offset":12,"partition":0,"topic":"orders"}],"b\"":[{"offset":7,"partition":0,"topic":"orders"}]},"version":1}"#
        );
        let mut empty = Vec::new();
        encode_file(&mut empty, std::iter::empty());
        assert_eq!(empty, br#"{"groups":{},"version":1}"#);
    }

    #[test]
    fn merge_takes_the_newer_value_and_keeps_order() {
        let older = [(1, 'a'), (3, 'a'), (5, 'a')];
        let newer = [(0, 'b'), (3, 'b'), (6, 'b')];
        let merged: Vec<_> = merge_newer(older.into_iter(), newer.into_iter()).collect();
        assert_eq!(merged, [(0, 'b'), (1, 'a'), (3, 'b'), (5, 'a'), (6, 'b')]);
        let only_new: Vec<_> = merge_newer(std::iter::empty(), newer.into_iter()).collect();
        assert_eq!(only_new, newer);
    }

    proptest! {
        #[test]
        fn any_string_is_escaped_like_serde_json(s in any::<String>()) {
            prop_assert_eq!(string(&s), serde_json::to_string(&s).unwrap_or_default());
        }

        #[test]
        fn any_integer_is_formatted_like_display(n in any::<i64>()) {
            prop_assert_eq!(integer(n), n.to_string());
        }
    }
}
