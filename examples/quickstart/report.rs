//! Printing: aligned tables for the stats, the metadata, the org ids and
//! the arena figures.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::handlers::{EventLog, MethodStats};

/// Prints a section title.
pub fn section(title: &str) {
    println!("\n== {title} ==");
}

/// Whether `cell` reads as a number (a count, or a figure with a unit).
fn is_number(cell: &str) -> bool {
    cell.split(' ')
        .next()
        .is_some_and(|n| !n.is_empty() && n.parse::<f64>().is_ok())
}

/// Prints `rows` under `header`, each column as wide as its widest cell;
/// columns whose cells are all numbers are right-aligned.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    let mut numeric = vec![!rows.is_empty(); header.len()];
    for row in rows {
        for (column, cell) in row.iter().enumerate().take(header.len()) {
            widths[column] = widths[column].max(cell.len());
            numeric[column] &= is_number(cell);
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::from(" ");
        for ((cell, width), right) in cells.zip(&widths).zip(&numeric) {
            if *right {
                out.push_str(&format!(" {cell:>width$} "));
            } else {
                out.push_str(&format!(" {cell:<width$} "));
            }
        }
        println!("{}", out.trim_end());
    };
    line(&mut header.iter().copied());
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    line(&mut rule.iter().map(String::as_str));
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
}

fn millis(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}

/// One row per (side, method) of the metrics handlers.
pub fn stats_table(sides: &[(&str, &BTreeMap<String, MethodStats>)]) {
    let mut rows = Vec::new();
    for (side, methods) in sides {
        for (method, stats) in *methods {
            let codes: Vec<String> = stats
                .codes
                .iter()
                .map(|(code, n)| format!("{code}={n}"))
                .collect();
            rows.push(vec![
                (*side).to_owned(),
                method.clone(),
                stats.calls.to_string(),
                stats.messages_in.to_string(),
                stats.messages_out.to_string(),
                stats.bytes_in.to_string(),
                stats.bytes_out.to_string(),
                millis(stats.percentile(50)),
                millis(stats.percentile(99)),
                codes.join(" "),
            ]);
        }
    }
    table(
        &[
            "side",
            "method",
            "calls",
            "msgs in",
            "msgs out",
            "bytes in",
            "bytes out",
            "p50",
            "p99",
            "status codes",
        ],
        &rows,
    );
}

/// The first RPC's events in full, then event counts, per side.
pub fn event_logs(sides: &[(&str, &EventLog)]) {
    for (side, log) in sides {
        if let Some(first) = log.first() {
            println!("  {side}: first RPC ({}):", first.rpc);
            for (i, event) in first.events.iter().enumerate() {
                println!("    {:>2}. {event}", i + 1);
            }
        }
    }
    let mut kinds: Vec<&'static str> = Vec::new();
    let counts: Vec<(u64, BTreeMap<&'static str, u64>)> =
        sides.iter().map(|(_, log)| log.counts()).collect();
    for (_, by_kind) in &counts {
        for kind in by_kind.keys() {
            if !kinds.contains(kind) {
                kinds.push(kind);
            }
        }
    }
    let mut header = vec!["side", "rpcs"];
    header.extend(kinds.iter().copied());
    let rows: Vec<Vec<String>> = sides
        .iter()
        .zip(&counts)
        .map(|((side, _), (rpcs, by_kind))| {
            let mut row = vec![(*side).to_owned(), rpcs.to_string()];
            row.extend(
                kinds
                    .iter()
                    .map(|kind| by_kind.get(kind).copied().unwrap_or(0).to_string()),
            );
            row
        })
        .collect();
    println!("  then every RPC, counted by event:");
    table(&header, &rows);
}
