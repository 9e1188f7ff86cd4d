//! The bootstrap's wire format, without I/O (so it can be fuzzed): a 24-byte header (magic, kind,
//! sequence number, sender rank, payload length; little-endian) and the payload. Both sides check
//! the payload limit: the sender before writing, the receiver before allocating.

/// "MKBS": the first word of every frame (anything else is not an mkernel bootstrap peer).
pub const MAGIC: u32 = 0x4d4b_4253;
/// Bytes of a frame header.
pub const HEADER: usize = 24;
/// Largest payload a frame may carry.
pub const MAX_PAYLOAD: usize = 64 << 20;

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Kind {
    /// A rank joining: payload = its WORLD_SIZE (u32).
    Hello = 1,
    /// A rank's contribution to an all-gather.
    Gather = 2,
    /// Rank 0's answer: the join's acknowledgement or the packed all-gather result.
    Result = 3,
    /// Rank 0 telling a rank why the group failed (payload: the message).
    Error = 4,
    /// A rank telling rank 0 why it gives up (payload: the message); rank 0 tells every rank.
    Abort = 5,
}

impl Kind {
    fn from_u32(k: u32) -> Option<Kind> {
        Some(match k {
            1 => Kind::Hello,
            2 => Kind::Gather,
            3 => Kind::Result,
            4 => Kind::Error,
            5 => Kind::Abort,
            _ => return None,
        })
    }
}

/// One decoded frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// What it is.
    pub kind: Kind,
    /// The bootstrap step it belongs to (0: the join).
    pub seq: u64,
    /// The sender's rank.
    pub rank: u32,
    /// The payload.
    pub payload: Vec<u8>,
}

/// A frame header that breaks a rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The first word is not [`MAGIC`].
    #[error("bad bootstrap frame (magic {0:#x}; another program on this port?)")]
    BadMagic(u32),
    /// The kind is not one of [`Kind`].
    #[error("unknown bootstrap frame kind {0}")]
    UnknownKind(u32),
    /// The payload exceeds [`MAX_PAYLOAD`].
    #[error("a bootstrap frame of {len} bytes exceeds the {max}-byte limit")]
    TooLong {
        /// The payload's length.
        len: u64,
        /// The limit.
        max: usize,
    },
}

/// A decoded header: the frame minus its payload, and the payload's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// What the frame is.
    pub kind: Kind,
    /// Its step.
    pub seq: u64,
    /// The sender.
    pub rank: u32,
    /// Payload bytes that follow (at most [`MAX_PAYLOAD`]).
    pub len: usize,
}

/// Check and decode a header.
pub fn decode_header(h: &[u8; HEADER]) -> Result<Header, FrameError> {
    let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    if word(0) != MAGIC {
        return Err(FrameError::BadMagic(word(0)));
    }
    let kind = Kind::from_u32(word(4)).ok_or(FrameError::UnknownKind(word(4)))?;
    let len = word(20) as usize;
    if len > MAX_PAYLOAD {
        return Err(FrameError::TooLong { len: len as u64, max: MAX_PAYLOAD });
    }
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&h[8..16]);
    Ok(Header { kind, seq: u64::from_le_bytes(seq), rank: word(16), len })
}

/// Decode the frame at the start of `buf`: the frame and the bytes it took, `None` when `buf`
/// holds only part of one, or the rule its header breaks.
pub fn decode(buf: &[u8]) -> Result<Option<(Frame, usize)>, FrameError> {
    let Some(h) = buf.first_chunk::<HEADER>() else { return Ok(None) };
    let h = decode_header(h)?;
    let Some(payload) = buf.get(HEADER..HEADER + h.len) else { return Ok(None) };
    Ok(Some((Frame { kind: h.kind, seq: h.seq, rank: h.rank, payload: payload.to_vec() }, HEADER + h.len)))
}

/// Encode a frame; a payload over the limit is refused here, before anything is sent.
pub fn encode(kind: Kind, seq: u64, rank: u32, payload: &[u8]) -> Result<Vec<u8>, FrameError> {
    if payload.len() > MAX_PAYLOAD {
        return Err(FrameError::TooLong { len: payload.len() as u64, max: MAX_PAYLOAD });
    }
    let mut buf = Vec::with_capacity(HEADER + payload.len());
    buf.extend_from_slice(&MAGIC.to_le_bytes());
    buf.extend_from_slice(&(kind as u32).to_le_bytes());
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.extend_from_slice(&rank.to_le_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(payload);
    Ok(buf)
}

/// Blobs as one payload: each as a u32 length and its bytes.
pub fn pack(blobs: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(blobs.iter().map(|b| 4 + b.len()).sum());
    for b in blobs {
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(b);
    }
    out
}

/// Exactly `n` blobs packed by [`pack`], or `None` when `data` is anything else.
pub fn unpack(mut data: &[u8], n: usize) -> Option<Vec<Vec<u8>>> {
    // Each blob takes at least 4 bytes: never reserve more than the data can hold.
    let mut out = Vec::with_capacity(n.min(data.len() / 4));
    for _ in 0..n {
        let len = u32::from_le_bytes(*data.first_chunk::<4>()?) as usize;
        let blob = data.get(4..4usize.checked_add(len)?)?;
        out.push(blob.to_vec());
        data = &data[4 + len..];
    }
    data.is_empty().then_some(out)
}

/// At most `max` characters of `s` (a peer's message inside ours), marked when cut.
pub fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((cut, _)) => format!("{}... ({} more bytes)", &s[..cut], s.len() - cut),
    }
}
