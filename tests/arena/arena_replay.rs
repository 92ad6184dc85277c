//! go-arena's replay workloads (100 000 allocations, 4 KiB buffers, fixed
//! seeds) in the three walks: the cursor (default), the first-fit scan from
//! buffer 0 (go-arena v1.2.0) and low-waste mode. Prints slack % and asserts
//! the bounds the design promises. Not run under valgrind (the first-fit scan
//! is O(buffers) per allocation); `tests/arena/arena.rs` replays a prefix there.

use tonic_hotpath::arena::MonotonicArena;
use tonic_hotpath::arena::replay::{Workload, slack_percent};

#[derive(Debug, Clone, Copy)]
enum Walk {
    Cursor,
    FirstFit,
    LowWaste,
}

fn replay(workload: Workload, walk: Walk) -> MonotonicArena {
    let builder = MonotonicArena::builder().min_buffer_size(Workload::BUFFER_SIZE);
    let arena = match walk {
        Walk::Cursor => builder.build(),
        Walk::FirstFit => builder.scan_from_zero(true).build(),
        Walk::LowWaste => builder.low_waste(true).build(),
    };
    let mut requested = 0;
    for layout in workload.requests() {
        let ptr = arena.alloc_layout(layout).expect("replay allocation");
        assert_eq!(ptr.as_ptr() as usize % layout.align(), 0);
        requested += layout.size();
    }
    assert!(arena.len() >= requested, "len counts every requested byte");
    println!(
        "{workload:?} {walk:?}: slack {:.3} % (cap {} B, len {} B, requested {} B, {} buffers)",
        slack_percent(&arena),
        arena.cap(),
        arena.len(),
        requested,
        arena.buffer_count()
    );
    arena
}

#[test]
fn workloads_are_deterministic_and_shaped_as_specified() {
    let mixed: Vec<usize> = Workload::Mixed.sizes().collect();
    assert_eq!(mixed.len(), 100_000);
    assert!(mixed.iter().all(|&s| (8..512).contains(&s)));
    assert_eq!(mixed, Workload::Mixed.sizes().collect::<Vec<_>>());
    let bimodal: Vec<usize> = Workload::Bimodal.sizes().collect();
    for (n, &s) in bimodal.iter().enumerate() {
        let range = if n % 16 == 15 { 4096..12288 } else { 8..64 };
        assert!(range.contains(&s), "allocation {n}: {s}");
    }
}

#[test]
fn mixed_cursor_abandons_tails_like_go_arena() {
    let slack = slack_percent(&replay(Workload::Mixed, Walk::Cursor));
    // go-arena v1.3.0 reports 4.16 % for this workload.
    assert!((3.0..5.5).contains(&slack), "{slack}");
}

#[test]
fn bimodal_cursor_abandons_tails_like_go_arena() {
    let slack = slack_percent(&replay(Workload::Bimodal, Walk::Cursor));
    // go-arena v1.3.0 reports 29.2 %.
    assert!((25.0..33.0).contains(&slack), "{slack}");
}

// go-arena v1.2.0 reports < 0.1 % for first fit; the last open buffers'
// tails weigh a little more here (see the printed figures).
#[test]
fn mixed_first_fit_scan_leaves_almost_nothing() {
    let slack = slack_percent(&replay(Workload::Mixed, Walk::FirstFit));
    assert!(slack < 0.2, "{slack}");
}

#[test]
fn bimodal_first_fit_scan_leaves_almost_nothing() {
    let slack = slack_percent(&replay(Workload::Bimodal, Walk::FirstFit));
    assert!(slack < 0.2, "{slack}");
}

#[test]
fn low_waste_slack_is_under_one_percent() {
    for workload in [Workload::Mixed, Workload::Bimodal] {
        let arena = replay(workload, Walk::LowWaste);
        let slack = slack_percent(&arena);
        assert!(slack < 1.0, "{workload:?}: {slack}");
    }
}

#[test]
fn low_waste_reuse_after_reset_keeps_slack_and_capacity() {
    for workload in [Workload::Mixed, Workload::Bimodal] {
        let mut arena = replay(workload, Walk::LowWaste);
        let (cap, buffers) = (arena.cap(), arena.buffer_count());
        arena.reset();
        for layout in workload.requests() {
            arena.alloc_layout(layout).expect("second replay");
        }
        assert_eq!(
            arena.cap(),
            cap,
            "{workload:?}: same requests fit the same buffers"
        );
        assert_eq!(arena.buffer_count(), buffers);
        assert!(slack_percent(&arena) < 1.0);
    }
}
