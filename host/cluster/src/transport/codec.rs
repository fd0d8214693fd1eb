//! Byte-level reading and writing of frames: LEB128 varints and length-prefixed fields. Every
//! read is bounds-checked and every length is limited before anything is allocated, so a
//! hostile frame costs at most its own size.

use bytes::Bytes;

/// Why a frame could not be decoded. Answered as `INVALID_ARGUMENT` when it has a reply
/// subject; never a panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Not a Sluice frame (wrong magic bytes).
    #[error("not a Sluice cluster frame")]
    BadMagic,
    /// A wire version this host does not speak.
    #[error("unsupported wire version {found} (this host speaks {supported})")]
    Version {
        /// The frame's version.
        found: u8,
        /// Ours.
        supported: u8,
    },
    /// A frame kind this decoder does not expect here.
    #[error("unexpected frame kind {0}")]
    Kind(u8),
    /// The frame ends inside a field.
    #[error("frame truncated")]
    Truncated,
    /// A varint longer than 64 bits.
    #[error("malformed varint")]
    Varint,
    /// A field longer than its limit.
    #[error("{field} of {len} bytes exceeds its limit of {max}")]
    TooLong {
        /// The field.
        field: &'static str,
        /// Its length.
        len: u64,
        /// The limit.
        max: usize,
    },
    /// A text field that is not UTF-8.
    #[error("{0} is not UTF-8")]
    Utf8(&'static str),
    /// A tag byte with no meaning.
    #[error("unknown {field} {value}")]
    Tag {
        /// The field.
        field: &'static str,
        /// The byte.
        value: u8,
    },
    /// A batch with no calls, or more than allowed.
    #[error("batch of {count} calls (allowed 1..={max})")]
    BatchSize {
        /// Calls in the frame.
        count: u64,
        /// The limit.
        max: usize,
    },
    /// Bytes after the last field.
    #[error("{0} bytes after the end of the frame")]
    Trailing(usize),
}

/// Appends fields to a frame.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn with_capacity(n: usize) -> Self {
        Self {
            buf: Vec::with_capacity(n),
        }
    }

    pub fn u8(&mut self, b: u8) {
        self.buf.push(b);
    }

    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
}

/// Reads fields from a frame; payloads are zero-copy slices of the message.
pub(crate) struct Reader<'a> {
    src: &'a Bytes,
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(src: &'a Bytes) -> Self {
        Self { src, pos: 0 }
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self.src.get(self.pos).ok_or(DecodeError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            let bits = u64::from(b & 0x7f);
            // The 10th byte may carry only the top bit of a u64.
            if shift == 63 && bits > 1 {
                return Err(DecodeError::Varint);
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::Varint)
    }

    /// A length-prefixed field of at most `max` bytes, as a slice of the frame.
    pub fn bytes(&mut self, field: &'static str, max: usize) -> Result<Bytes, DecodeError> {
        let len = self.len_field(field, max)?;
        Ok(self.take(len))
    }

    /// The next `n` bytes (already checked by [`Self::len_field`]) as a slice of the frame.
    pub fn take(&mut self, n: usize) -> Bytes {
        let b = self.src.slice(self.pos..self.pos + n);
        self.pos += n;
        b
    }

    /// Reads a length and checks it against `max` and the bytes left, consuming nothing else.
    pub fn len_field(&mut self, field: &'static str, max: usize) -> Result<usize, DecodeError> {
        let len = self.varint()?;
        if len > max as u64 {
            return Err(DecodeError::TooLong { field, len, max });
        }
        let len = len as usize;
        if self.src.len() - self.pos < len {
            return Err(DecodeError::Truncated);
        }
        Ok(len)
    }

    /// Skips `n` bytes already checked by [`Self::len_field`].
    pub fn skip(&mut self, n: usize) {
        self.pos += n;
    }

    pub fn str(&mut self, field: &'static str, max: usize) -> Result<String, DecodeError> {
        let b = self.bytes(field, max)?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError::Utf8(field))
    }

    pub fn finish(self) -> Result<(), DecodeError> {
        match self.src.len() - self.pos {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_the_edges() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut w = Writer::default();
            w.varint(v);
            let b = Bytes::from(w.buf);
            let mut r = Reader::new(&b);
            assert_eq!(r.varint().unwrap(), v);
            r.finish().unwrap();
        }
    }

    #[test]
    fn hostile_lengths_and_varints_are_refused_before_allocating() {
        let overlong = Bytes::from(vec![0xff; 11]);
        assert_eq!(Reader::new(&overlong).varint(), Err(DecodeError::Varint));
        let mut w = Writer::default();
        w.varint(u64::MAX);
        let huge = Bytes::from(w.buf);
        assert!(matches!(
            Reader::new(&huge).bytes("payload", 10),
            Err(DecodeError::TooLong { .. })
        ));
        let mut w = Writer::default();
        w.varint(5);
        w.u8(1);
        let short = Bytes::from(w.buf);
        assert_eq!(
            Reader::new(&short).bytes("payload", 10),
            Err(DecodeError::Truncated)
        );
        let bad = Bytes::from_static(&[2, 0xff, 0xfe]);
        assert_eq!(
            Reader::new(&bad).str("target", 10),
            Err(DecodeError::Utf8("target"))
        );
    }
}
