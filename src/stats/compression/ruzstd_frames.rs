//! zstd with `ruzstd`, a pure-Rust decoder, with tonic's framing rules
//! around it (without feature `zstd`, and in the benches beside it).

use std::io::{self, Read};

use super::input::{Input, Unbuffered};
use super::{Count, Decoders, DecompressError, READ_LEN, RETAINED_MAX};

/// zstd's window limit without `ZSTD_d_windowLogMax` (tonic sets none):
/// `ZSTD_MAXWINDOWSIZE_DEFAULT`.
const ZSTD_MAX_WINDOW: u64 = (1 << 27) + 1;

impl Decoders {
    /// zstd with `ruzstd`, framed as the zstd crate's streaming decoder
    /// frames it: frames until the input ends (an empty input is an
    /// incomplete frame), skippable frames skipped, every byte must belong
    /// to a frame.
    pub(super) fn ruzstd<P: AsRef<[u8]>>(
        &mut self,
        pieces: &[P],
        count: &mut Count,
    ) -> Result<(), DecompressError> {
        let result = self.ruzstd_decode(pieces, count);
        // The decoder's buffer grows with what it decodes (up to the
        // window): a large one is not kept.
        let small = result.is_ok() && count.total as usize <= RETAINED_MAX;
        if !small && count.limit as usize > RETAINED_MAX {
            self.ruzstd = None;
        }
        result
    }

    fn ruzstd_decode<P: AsRef<[u8]>>(
        &mut self,
        pieces: &[P],
        count: &mut Count,
    ) -> Result<(), DecompressError> {
        use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
        let limit = count.limit;
        let decoder = self.ruzstd.get_or_insert_with(|| {
            let mut decoder = FrameDecoder::new();
            decoder.set_max_window_size(ZSTD_MAX_WINDOW);
            Box::new(decoder)
        });
        // ruzstd reads what it needs, block by block: no windows.
        let mut input = Input::new(pieces, 0, &mut self.spill);
        if input.len == 0 {
            return Err(incomplete_frame().into());
        }
        while input.remaining() > 0 {
            let mut head = [0; 5];
            let peeked = input.peek(&mut head);
            if peeked < 4 {
                return Err(zstd_error("Unknown frame descriptor").into());
            }
            let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
            if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
                // A skippable frame: magic, 4-byte length, that many bytes.
                input.skip(4);
                let mut size = [0; 4];
                if input.peek(&mut size) < size.len() {
                    return Err(incomplete_frame().into());
                }
                input.skip(size.len());
                let skip = u32::from_le_bytes(size) as usize;
                if input.remaining() < skip {
                    return Err(incomplete_frame().into());
                }
                input.skip(skip);
                continue;
            }
            if magic != 0xFD2F_B528 {
                return Err(zstd_error("Unknown frame descriptor").into());
            }
            // Frame_Header_Descriptor's reserved bit must be zero; ruzstd
            // does not check it.
            if peeked == 5 && head[4] & 0x08 != 0 {
                return Err(zstd_error("Unsupported frame parameter").into());
            }
            decoder
                .reset(Unbuffered(&mut input))
                .map_err(ruzstd_error)?;
            let declared = frame_declares_size(&head);
            let content_size = decoder.content_size();
            // The C library decodes a frame whose declared content fits
            // the read's buffer in one pass, and hands nothing out unless
            // the whole frame is valid: count such a frame once verified.
            let one_pass = declared && content_size <= READ_LEN as u64;
            let mut frame = count.frame(if one_pass {
                READ_LEN as u32
            } else {
                limit - count.total
            });
            let drained = (|| {
                while !decoder.is_finished() {
                    decoder
                        .decode_blocks(
                            Unbuffered(&mut input),
                            BlockDecodingStrategy::UptoBytes(READ_LEN),
                        )
                        .map_err(ruzstd_error)?;
                    drain(decoder, &mut self.out, &mut frame)?;
                }
                drain(decoder, &mut self.out, &mut frame)
            })();
            match drained {
                Err(DecompressError::TooLarge { .. }) if one_pass => {
                    return Err(zstd_error("Destination buffer is too small").into());
                }
                Err(DecompressError::TooLarge { .. }) => {
                    return Err(DecompressError::TooLarge { limit });
                }
                other => other?,
            }
            if let Some(stored) = decoder.get_checksum_from_data()
                && decoder.get_calculated_checksum() != Some(stored)
            {
                return Err(zstd_error("Restored data doesn't match checksum").into());
            }
            if declared && u64::from(frame.total) != content_size {
                return Err(zstd_error("Data corruption detected").into());
            }
            count.append(frame)?;
        }
        Ok(())
    }
}

/// Whether a zstd frame header (magic and descriptor) declares a content
/// size: a `Frame_Content_Size_flag`, or a single segment.
fn frame_declares_size(head: &[u8; 5]) -> bool {
    let descriptor = head[4];
    descriptor >> 6 != 0 || descriptor & 0x20 != 0
}

/// Counts what `decoder` can hand out now.
fn drain(
    decoder: &mut ruzstd::decoding::FrameDecoder,
    out: &mut [u8],
    count: &mut Count,
) -> Result<(), DecompressError> {
    loop {
        let read = decoder.read(out)?;
        if read == 0 {
            return Ok(());
        }
        count.add(&out[..read])?;
    }
}

#[cold]
fn ruzstd_error(error: ruzstd::decoding::errors::FrameDecoderError) -> DecompressError {
    DecompressError::Corrupt(io::Error::new(
        io::ErrorKind::InvalidData,
        error.to_string(),
    ))
}

#[cold]
fn zstd_error(message: &'static str) -> io::Error {
    io::Error::other(message)
}

/// The zstd crate's error for input that ends inside a frame.
#[cold]
fn incomplete_frame() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "incomplete frame")
}
