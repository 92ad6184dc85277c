//! Build a response in an arena byte buffer, look at len/cap/peak, reset,
//! and serve repeated requests from an `ArenaPool`.
//!
//! Run with `cargo run --example arena`.

use std::fmt::Write as _;

use tonic_hotpath::arena::{ArenaPool, ByteBuffer, MonotonicArena};

/// Use-case key for the pool: arenas are sized from this key's past peaks.
const RENDER_ORDERS: u64 = 1;

/// Renders a JSON list of `count` orders into `out`.
fn render(out: &mut ByteBuffer<'_>, count: usize) -> std::fmt::Result {
    out.write_str("{\"orders\":[")?;
    for id in 0..count {
        let sep = if id == 0 { "" } else { "," };
        write!(out, "{sep}{{\"id\":{id},\"total_cents\":{}}}", id * 199)?;
    }
    out.write_str("]}")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut arena = MonotonicArena::builder().min_buffer_size(16 * 1024).build();

    {
        let mut out = ByteBuffer::new(&arena);
        render(&mut out, 500)?;
        // Small typed values live beside the response in the same arena.
        let status = arena.alloc_str("OK")?;
        println!(
            "response: {} bytes ({}...), status {status}",
            out.len(),
            &out.as_str()?[..40]
        );
    }
    println!(
        "arena after one response: len {} B, cap {} B, peak {} B, {} buffers",
        arena.len(),
        arena.cap(),
        arena.peak(),
        arena.buffer_count()
    );

    arena.reset(); // zeroes what was used, keeps the buffers
    println!(
        "after reset:              len {} B, cap {} B, peak {} B",
        arena.len(),
        arena.cap(),
        arena.peak()
    );

    let pool = ArenaPool::new();
    for request in 0..3 {
        let arena = pool.acquire(RENDER_ORDERS);
        let mut out = ByteBuffer::new(&arena);
        render(&mut out, 100 * (request + 1))?;
        let numbers = arena.alloc_slice_fill_with(64, |i| i as u32)?;
        println!(
            "pooled request {request}: {} B rendered, {} numbers, arena len {} B",
            out.len(),
            numbers.len(),
            arena.len()
        );
    } // each arena goes back to the pool here: peak recorded, reset
    println!(
        "pool: {} idle arena(s), next new arena for this key gets {} B buffers",
        pool.idle_count(),
        pool.size_for(RENDER_ORDERS)
    );
    Ok(())
}
