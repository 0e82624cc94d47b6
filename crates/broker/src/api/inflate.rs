//! Bounded decompression of a producer's record batches. `kafka-protocol` inflates a batch
//! whole before anything can look at it: a 255 KiB gzip batch of zeros became 256 MiB. Here
//! every codec reads through a limit and stops one byte past it, so a bomb costs at most the
//! limit, never what it inflates to. The codecs are the crates `kafka-protocol` itself uses
//! (flate2, lz4, snap, zstd), with its framings: gzip streams, LZ4 frames, zstd frames, and
//! Snappy in xerial's block framing (what Kafka's Java client writes) or raw.

use std::io::Read;

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Buf, Bytes};
use kafka_protocol::records::Compression;

/// xerial's Snappy stream header (snappy-java's `SnappyCodec.MAGIC_HEADER` and version).
const SNAPPY_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";

/// The message of a decompression stopped at its limit (matched by the caller).
pub(super) const TOO_LARGE: &str = "decompressed bytes exceed the limit";

/// Reads `reader` to its end, failing with [`TOO_LARGE`] once it yields more than `limit`.
fn read_bounded(reader: impl Read, limit: usize) -> Result<Bytes> {
    let mut out = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader.take(cap).read_to_end(&mut out)?;
    if out.len() > limit {
        bail!(TOO_LARGE);
    }
    Ok(Bytes::from(out))
}

/// The records of one batch, decompressed, at most `limit` bytes.
pub(crate) fn inflate(buf: &mut Bytes, compression: Compression, limit: usize) -> Result<Bytes> {
    let input = buf.copy_to_bytes(buf.remaining());
    match compression {
        Compression::None => Ok(input),
        Compression::Gzip => {
            read_bounded(flate2::read::GzDecoder::new(input.reader()), limit).context("gzip")
        }
        Compression::Lz4 => {
            let decoder = lz4::Decoder::new(input.reader()).context("lz4")?;
            read_bounded(decoder, limit).context("lz4")
        }
        Compression::Zstd => {
            let decoder = zstd::stream::read::Decoder::new(input.reader()).context("zstd")?;
            read_bounded(decoder, limit).context("zstd")
        }
        Compression::Snappy => snappy(&input, limit).context("snappy"),
    }
}

/// Snappy, xerial-framed (`magic, then [u32 length, block]*`) or raw; each block's
/// announced length is checked against what is left of the limit before it is allocated.
fn snappy(input: &[u8], limit: usize) -> Result<Bytes> {
    let mut decoder = snap::raw::Decoder::new();
    let mut block = |compressed: &[u8], out: &mut Vec<u8>| -> Result<()> {
        let len = snap::raw::decompress_len(compressed)?;
        if len > limit.saturating_sub(out.len()) {
            bail!(TOO_LARGE);
        }
        let start = out.len();
        out.resize(start + len, 0);
        decoder.decompress(compressed, &mut out[start..])?;
        Ok(())
    };
    let mut out = Vec::new();
    match input.strip_prefix(&SNAPPY_MAGIC[..]) {
        None => block(input, &mut out)?,
        Some(mut rest) => {
            while !rest.is_empty() {
                let (len, tail) = rest
                    .split_first_chunk::<4>()
                    .ok_or_else(|| anyhow!("a truncated block length"))?;
                let len = usize::try_from(u32::from_be_bytes(*len))?;
                if len > tail.len() {
                    bail!("a block of {len} bytes with {} left", tail.len());
                }
                let (compressed, next) = tail.split_at(len);
                block(compressed, &mut out)?;
                rest = next;
            }
        }
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const LIMIT: usize = 1 << 20;

    fn zeros(n: usize) -> Vec<u8> {
        vec![0; n]
    }

    fn gzip(data: &[u8]) -> Bytes {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        Bytes::from(e.finish().unwrap())
    }

    fn lz4(data: &[u8]) -> Bytes {
        let mut e = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
        e.write_all(data).unwrap();
        let (out, r) = e.finish();
        r.unwrap();
        Bytes::from(out)
    }

    fn zstd(data: &[u8]) -> Bytes {
        Bytes::from(zstd::stream::encode_all(data, 3).unwrap())
    }

    fn snappy_xerial(data: &[u8]) -> Bytes {
        let mut out = SNAPPY_MAGIC.to_vec();
        for chunk in data.chunks(32 * 1024) {
            let block = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
            out.extend_from_slice(&(block.len() as u32).to_be_bytes());
            out.extend_from_slice(&block);
        }
        Bytes::from(out)
    }

    /// Each codec inflates what fits and stops a bomb at the limit, whatever it would
    /// inflate to.
    #[test]
    fn every_codec_inflates_up_to_the_limit_and_refuses_beyond() {
        let fits = zeros(LIMIT);
        let bomb = zeros(16 * LIMIT);
        type Compress = fn(&[u8]) -> Bytes;
        let cases: [(Compression, Compress); 4] = [
            (Compression::Gzip, gzip),
            (Compression::Lz4, lz4),
            (Compression::Zstd, zstd),
            (Compression::Snappy, snappy_xerial),
        ];
        for (codec, compress) in cases {
            let out = inflate(&mut compress(&fits), codec, LIMIT).unwrap();
            assert_eq!(out.len(), LIMIT, "{codec:?}");
            let err = inflate(&mut compress(&bomb), codec, LIMIT).unwrap_err();
            assert!(format!("{err:#}").contains(TOO_LARGE), "{codec:?}: {err:#}");
        }
        // Raw snappy too.
        let raw = Bytes::from(snap::raw::Encoder::new().compress_vec(&bomb).unwrap());
        assert!(inflate(&mut raw.clone(), Compression::Snappy, LIMIT).is_err());
        assert_eq!(
            inflate(&mut raw.clone(), Compression::Snappy, 16 * LIMIT)
                .unwrap()
                .len(),
            16 * LIMIT
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for codec in [
            Compression::Gzip,
            Compression::Lz4,
            Compression::Zstd,
            Compression::Snappy,
        ] {
            let mut junk = Bytes::from_static(
                b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff\xff\xff",
            );
            assert!(inflate(&mut junk, codec, LIMIT).is_err(), "{codec:?}");
        }
    }
}
