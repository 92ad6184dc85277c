//! The runtime overrides file (YAML), as an operator or a tool may write
//! it: never a panic; an error names a line of the text; what is accepted
//! is valid (tenant ids, bursts of at least 1, positive rates) and reads
//! back the same when written out again.

use std::fmt::Write as _;

use tonic_hotpath::limits::{Limits, Rate, parse_overrides};

pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let defaults = Limits::unlimited();
    let overrides = match parse_overrides(text, defaults) {
        Ok(overrides) => overrides,
        Err(error) => {
            // YAML's line breaks: `\r\n`, `\n`, and a lone `\r`.
            let lines = text.replace("\r\n", "\n").split(['\n', '\r']).count();
            assert!(
                (1..=lines + 1).contains(&error.line()),
                "line {} of {lines}: {error}",
                error.line()
            );
            assert!(
                error
                    .to_string()
                    .starts_with(&format!("line {}: ", error.line()))
            );
            return;
        }
    };
    for (_, limits) in &overrides {
        for rate in [limits.rate, limits.work_rate].into_iter().flatten() {
            assert!(rate.burst >= 1, "{rate:?}");
            assert!(
                rate.per_second.is_finite() && rate.per_second > 0.0,
                "{rate:?}"
            );
        }
    }
    // Written out and read again: the same overrides.
    let mut written = String::from("overrides:\n");
    for (tenant, limits) in &overrides {
        let _ = writeln!(written, "  \"{}\":", tenant.as_str());
        let value = |n: Option<String>| n.unwrap_or_else(|| "null".into());
        let _ = writeln!(
            written,
            "    max_in_flight: {}",
            value(limits.max_in_flight.map(|n| n.to_string()))
        );
        write_rate(&mut written, "", limits.rate);
        write_rate(&mut written, "work_", limits.work_rate);
    }
    let mut tenants: Vec<_> = overrides.iter().map(|(tenant, _)| tenant).collect();
    tenants.sort();
    tenants.dedup();
    if tenants.len() < overrides.len() {
        return; // written out, the duplicate keys would be refused
    }
    let again =
        parse_overrides(&written, defaults).unwrap_or_else(|error| panic!("{written}: {error}"));
    assert_eq!(again, overrides, "{written}");
}

fn write_rate(out: &mut String, prefix: &str, rate: Option<Rate>) {
    match rate {
        Some(rate) => {
            let _ = writeln!(out, "    {prefix}rate: {:?}", rate.per_second);
            let _ = writeln!(out, "    {prefix}burst: {}", rate.burst);
        }
        None => {
            let _ = writeln!(out, "    {prefix}rate: null");
        }
    }
}
