//! The backend: requires an org id, assembles each reply in a
//! `MonotonicArena` (reset after every request) and echoes back the `x-`
//! metadata exactly as it arrived.

use std::sync::Mutex;

use tonic::metadata::{KeyAndValueRef, MetadataMap};
use tonic::{Request, Response, Status};
use tonic_hotpath::arena::{ByteBuffer, MonotonicArena};
use tonic_hotpath::tenant::OrgId;

use crate::echo::{EchoRequest, EchoResponse};
use crate::handlers::lock;
use crate::wire::{self, ArenaFigures};

/// Records the backend assembles per call.
pub const RECORDS_PER_CALL: usize = 48;
/// The arena's buffer size: small, so a reply spans a few buffers.
pub const ARENA_BUFFER_SIZE: usize = 2 * 1024;

/// What the backend's arena did over the whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArenaTotals {
    /// Replies assembled (one reset after each).
    pub resets: u64,
    /// Size of the last reply text: the next reply reserves this plus an
    /// eighth, so it is assembled in one piece instead of by doubling.
    pub last_reply_bytes: usize,
    /// Largest reply text, in bytes.
    pub max_reply_bytes: usize,
    /// Arena `len` after assembling the first reply (grown by doubling,
    /// nothing to reserve from yet).
    pub first_len: usize,
    /// Arena `len` after assembling the last reply (reserved up front).
    pub last_len: usize,
    /// Largest `len` seen right after a reset (must be 0).
    pub max_len_after_reset: usize,
    /// Figures at the end of the run.
    pub last: ArenaFigures,
}

/// The backend service.
#[derive(Debug)]
pub struct Backend {
    arena: Mutex<(MonotonicArena, ArenaTotals)>,
}

impl Default for Backend {
    fn default() -> Self {
        let arena = MonotonicArena::builder()
            .min_buffer_size(ARENA_BUFFER_SIZE)
            .build();
        Backend {
            arena: Mutex::new((arena, ArenaTotals::default())),
        }
    }
}

/// The `x-` entries of `metadata`, in the order they arrived (`-bin`
/// values as on the wire: base64).
pub fn x_metadata(metadata: &MetadataMap) -> Vec<(String, String)> {
    let mut entries = Vec::new();
    for entry in metadata.iter() {
        let (key, value) = match entry {
            KeyAndValueRef::Ascii(key, value) => (key.as_str(), value.to_str().ok()),
            KeyAndValueRef::Binary(key, value) => (
                key.as_str(),
                std::str::from_utf8(value.as_encoded_bytes()).ok(),
            ),
        };
        if key.starts_with("x-") {
            entries.push((key.to_owned(), value.unwrap_or("<not text>").to_owned()));
        }
    }
    entries
}

fn out_of_memory(error: impl std::fmt::Display) -> Status {
    Status::resource_exhausted(format!("backend arena: {error}"))
}

impl Backend {
    /// The arena's totals so far.
    pub fn arena_totals(&self) -> ArenaTotals {
        lock(&self.arena).1
    }

    /// Handles one call for `org_id`.
    pub async fn unary(
        &self,
        org_id: OrgId,
        request: Request<EchoRequest>,
    ) -> Result<Response<EchoResponse>, Status> {
        let metadata = x_metadata(request.metadata());
        let shards: Vec<&str> = metadata
            .iter()
            .filter(|(key, _)| key == "x-shard")
            .map(|(_, value)| value.as_str())
            .collect();
        let message = self.assemble(
            &shards.join(","),
            org_id.as_str(),
            &metadata,
            &request.get_ref().message,
        )?;
        Ok(Response::new(EchoResponse { message }))
    }

    /// Builds the reply text in the arena, copies it out, resets the arena
    /// (also when assembling failed, so no request inherits another's bytes).
    fn assemble(
        &self,
        shard: &str,
        org_id: &str,
        metadata: &[(String, String)],
        ask: &str,
    ) -> Result<String, Status> {
        let mut guard = lock(&self.arena);
        let (arena, totals) = &mut *guard;
        let assembled = write_reply(arena, totals, shard, org_id, metadata, ask);
        arena.reset();
        totals.resets += 1;
        totals.max_len_after_reset = totals.max_len_after_reset.max(arena.len());
        totals.last = ArenaFigures {
            len: arena.len(),
            cap: arena.cap(),
            peak: arena.peak(),
            buffers: arena.buffer_count(),
        };
        let text = assembled?;
        totals.last_reply_bytes = text.len();
        totals.max_reply_bytes = totals.max_reply_bytes.max(text.len());
        Ok(text)
    }
}

/// Writes one reply into `arena`, reserving room from the last reply's
/// size, and returns it as an owned string.
fn write_reply(
    arena: &MonotonicArena,
    totals: &mut ArenaTotals,
    shard: &str,
    org_id: &str,
    metadata: &[(String, String)],
    ask: &str,
) -> Result<String, Status> {
    let hint = totals.last_reply_bytes;
    let mut out = ByteBuffer::with_capacity(arena, hint + hint / 8).map_err(out_of_memory)?;
    wire::write_shard_head(&mut out, shard, org_id, metadata).map_err(out_of_memory)?;
    for item in 0..RECORDS_PER_CALL {
        let record = format_args!("{ask} item={item:03} org={org_id} qty={}", item * 7 % 13);
        wire::write_record(&mut out, record).map_err(out_of_memory)?;
    }
    let figures = ArenaFigures {
        len: arena.len(),
        cap: arena.cap(),
        peak: arena.peak(),
        buffers: arena.buffer_count(),
    };
    wire::write_arena(&mut out, figures).map_err(out_of_memory)?;
    if totals.resets == 0 {
        totals.first_len = figures.len;
    }
    totals.last_len = figures.len;
    let text = out
        .as_str()
        .map_err(|e| Status::internal(format!("backend reply is not UTF-8: {e}")))?;
    Ok(text.to_owned())
}
