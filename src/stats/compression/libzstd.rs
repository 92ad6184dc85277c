//! zstd with the C library tonic uses (feature `zstd`).

use std::io::{self, Read};

use super::input::Input;
use super::{Count, Decoders, DecompressError};

impl Decoders {
    /// tonic: `std::io::copy(&mut zstd::stream::read::Decoder::new(bytes)?, &mut limited)`,
    /// the same decoder over the same input windows, with this thread's
    /// context (reset by `with_context`).
    #[cfg(feature = "zstd")]
    pub(super) fn libzstd<P: AsRef<[u8]>>(
        &mut self,
        pieces: &[P],
        count: &mut Count,
    ) -> Result<(), DecompressError> {
        let result = self.libzstd_decode(pieces, count);
        // A streamed frame makes the context allocate an input and an
        // output buffer for the window its header declares, and keep them
        // for the next frames while they are large enough. tonic decodes
        // each message with a new context: one that kept larger buffers
        // from an earlier message reads a corrupt frame differently
        // (another error, or none: the buffers' sizes decide where a bad
        // block or offset is caught; found by the `decompress` fuzz
        // target). So the context is kept only while it holds no buffers:
        // what it saves is its own creation (the buffers would be
        // allocated again anyway).
        if self
            .libzstd
            .as_ref()
            .is_some_and(|context| context.sizeof() > self.libzstd_base)
        {
            self.libzstd = None;
        }
        result
    }

    #[cfg(feature = "zstd")]
    fn libzstd_decode<P: AsRef<[u8]>>(
        &mut self,
        pieces: &[P],
        count: &mut Count,
    ) -> Result<(), DecompressError> {
        use zstd::zstd_safe::DCtx;
        let context = match &mut self.libzstd {
            Some(context) => context,
            none => {
                let context = DCtx::try_create().ok_or_else(|| {
                    io::Error::other("zstd could not allocate a decompression context")
                })?;
                self.libzstd_base = context.sizeof();
                none.insert(context)
            }
        };
        let input = Input::new(pieces, DCtx::in_size(), &mut self.spill);
        let mut decoder = zstd::stream::read::Decoder::with_context(input, context);
        loop {
            let read = decoder.read(&mut self.out)?;
            if read == 0 {
                return Ok(());
            }
            count.add(&self.out[..read])?;
        }
    }
}
