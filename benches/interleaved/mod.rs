//! A layer's cost as a paired difference, shared by the benches: the
//! variants run interleaved, round after round in one process, so drift
//! hits all of them alike (criterion's rows run seconds apart and drift by
//! tens of ns on a shared VM).
#![allow(dead_code)]

use std::time::Duration;

/// One timed round of a variant: runs a fixed number of calls (set-up
/// inside the round but outside its timing is fine) and returns the time
/// they took.
pub type Round<'a> = Box<dyn FnMut() -> Duration + 'a>;

/// Runs `variants` interleaved for `rounds` rounds of `calls_per_round`
/// calls each, and prints per call each variant's fastest round, its
/// median round, and the fastest round's cost over the first variant (the
/// baseline). The fastest round is the figure: interference from other
/// work only adds time, so the minimum is the estimate it disturbs least;
/// the median shows the spread. Returns each variant's fastest round per
/// call, in ns, in the order given.
pub fn print_overhead(
    label: &str,
    variants: &mut [(&str, Round<'_>)],
    rounds: usize,
    calls_per_round: u32,
) -> Vec<f64> {
    let mut times = vec![Vec::with_capacity(rounds); variants.len()];
    for _ in 0..rounds {
        for ((_, run), times) in variants.iter_mut().zip(&mut times) {
            times.push(run());
        }
    }
    let per_call = |d: &Duration| d.as_nanos() as f64 / f64::from(calls_per_round);
    let mut baseline = None;
    let mut fastest_per_variant = Vec::with_capacity(variants.len());
    for ((name, _), times) in variants.iter().zip(&mut times) {
        times.sort_unstable();
        let (fastest, median) = (per_call(&times[0]), per_call(&times[rounds / 2]));
        fastest_per_variant.push(fastest);
        let over = fastest - *baseline.get_or_insert(fastest);
        println!(
            "interleaved {label}  {name:<42} {fastest:>8.1} ns/call (median {median:>8.1})  {over:>+7.1} ns over no layer"
        );
    }
    fastest_per_variant
}
