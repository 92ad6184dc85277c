//! zstd with the C library tonic uses (feature `zstd`).

use std::io::{self, Read};

use super::input::Input;
use super::{Count, Decoders, DecompressError, RETAINED_MAX};

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
        // A frame's header makes the context allocate buffers for the
        // window it declares (up to 128 MiB): those are not kept.
        if self
            .libzstd
            .as_ref()
            .is_some_and(|context| context.sizeof() > RETAINED_MAX)
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
            none => none.insert(DCtx::try_create().ok_or_else(|| {
                io::Error::other("zstd could not allocate a decompression context")
            })?),
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
