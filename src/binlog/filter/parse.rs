//! One clause of a filter, read as grpc-go's `fillMethodLoggerWithConfigString`
//! reads it: the same clauses accepted, with the same limits, and the same
//! refused. grpc-go matches a clause with regular expressions; this matches
//! the same strings by hand (`tests/binlog/filter.rs` checks the two agree).

use super::{FilterError, LogLimits};

/// A clause, borrowing from the filter's text.
pub(super) enum Clause<'a> {
    /// `*{..}`.
    All(LogLimits),
    /// `Service/*{..}`: the service.
    Service(&'a str, LogLimits),
    /// `Service/Method{..}` (`Some`) or `-Service/Method` (`None`), keyed by
    /// `Service/Method`.
    Method(&'a str, Option<LogLimits>),
}

/// Parses the clause at `position` (from 1), checking it alone; the caller
/// checks it against the clauses before it.
pub(super) fn clause(position: usize, text: &str) -> Result<Clause<'_>, FilterError> {
    let clause = || text.to_owned();
    if text.is_empty() {
        return Err(FilterError::EmptyClause { position });
    }
    if let Some(excluded) = text.strip_prefix('-') {
        let Some(split) = split(excluded) else {
            return Err(syntax(text, excluded));
        };
        if split.method == "*" {
            return Err(FilterError::ExcludedService { clause: clause() });
        }
        if !split.suffix.is_empty() {
            return Err(FilterError::ExclusionSuffix { clause: clause() });
        }
        return Ok(Clause::Method(split.key, None));
    }
    if let Some(suffix) = text.strip_prefix('*') {
        // grpc-go reads everything after a leading '*' as a suffix, so
        // "*/Method" fails there as a suffix; say what is really wrong.
        if suffix.starts_with('/') {
            return Err(FilterError::AnyServiceMethod { clause: clause() });
        }
        return Ok(Clause::All(limits(text, suffix)?));
    }
    let Some(split) = split(text) else {
        return Err(syntax(text, text));
    };
    let limits = limits(text, split.suffix)?;
    Ok(if split.method == "*" {
        Clause::Service(split.service, limits)
    } else {
        Clause::Method(split.key, Some(limits))
    })
}

/// The error for a clause that is not `service/method` shaped.
fn syntax(clause: &str, method: &str) -> FilterError {
    if method.starts_with("*/") {
        FilterError::AnyServiceMethod {
            clause: clause.to_owned(),
        }
    } else {
        FilterError::Syntax {
            clause: clause.to_owned(),
        }
    }
}

/// `service/method` and what follows it.
struct Split<'a> {
    service: &'a str,
    /// A method name, or `*`.
    method: &'a str,
    /// `service/method`.
    key: &'a str,
    suffix: &'a str,
}

/// `[0-9A-Za-z_]`: Go's `\w`.
fn is_word(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// grpc-go's `parseMethodConfigAndSuffix`: the regular expression
/// `^([\w./]+)/((?:\w+)|[*])(.+)?$`, in Go (RE2, leftmost-first) semantics.
///
/// No part matches a newline (`.` does not, and `$` is the end of the
/// text). The service is greedy: it is the longest run of `[\w./]` at the
/// start, cut back to the last `/` that a word character or `*` follows.
/// The method is then that whole word (greedy), or `*`, and the suffix is
/// the rest, whatever it is.
fn split(text: &str) -> Option<Split<'_>> {
    let bytes = text.as_bytes();
    if bytes.contains(&b'\n') {
        return None;
    }
    let run = bytes
        .iter()
        .position(|&b| !(is_word(b) || b == b'.' || b == b'/'))
        .unwrap_or(bytes.len());
    // The service is bytes[..slash], at least one byte, inside the run.
    (1..run).rev().find_map(|slash| {
        if bytes[slash] != b'/' {
            return None;
        }
        let start = slash + 1;
        let end = match bytes.get(start) {
            Some(&b) if is_word(b) => bytes[start..]
                .iter()
                .position(|&b| !is_word(b))
                .map_or(bytes.len(), |len| start + len),
            Some(b'*') => start + 1,
            _ => return None,
        };
        // Every byte split on is ASCII, so these are char boundaries.
        Some(Split {
            service: &text[..slash],
            method: &text[start..end],
            key: &text[..end],
            suffix: &text[end..],
        })
    })
}

/// grpc-go's `parseHeaderMessageLengthConfig`: `""` (both in full), or
/// `{h}`, `{h:N}`, `{m}`, `{m:M}`, or `{h;m}` with optional `:N` and `:M`.
/// As there, the whole suffix is matched before any number is converted.
fn limits(clause: &str, suffix: &str) -> Result<LogLimits, FilterError> {
    if suffix.is_empty() {
        return Ok(LogLimits::full());
    }
    let bad = || FilterError::Suffix {
        clause: clause.to_owned(),
        suffix: suffix.to_owned(),
    };
    let inner = suffix
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .ok_or_else(bad)?;
    let (header, message) = match inner.split_once(';') {
        None => match inner.as_bytes().first() {
            Some(b'h') => (part(inner, 'h').ok_or_else(bad)?, Some("0")),
            _ => (Some("0"), part(inner, 'm').ok_or_else(bad)?),
        },
        Some((header, message)) => (
            part(header, 'h').ok_or_else(bad)?,
            part(message, 'm').ok_or_else(bad)?,
        ),
    };
    let number = |digits: Option<&str>| match digits {
        None => Ok(LogLimits::UNLIMITED),
        // Only ASCII digits, so the one failure left is overflow.
        Some(digits) => digits.parse().map_err(|_| FilterError::Number {
            clause: clause.to_owned(),
            number: digits.to_owned(),
        }),
    };
    Ok(LogLimits {
        header: number(header)?,
        message: number(message)?,
    })
}

/// `h` or `h:N` (with `name` for `h`): `Some(None)` for no number,
/// `Some(Some(N))`, or `None` when it is neither (`(?::(\d+))?`).
fn part(text: &str, name: char) -> Option<Option<&str>> {
    let rest = text.strip_prefix(name)?;
    if rest.is_empty() {
        return Some(None);
    }
    let digits = rest.strip_prefix(':')?;
    let digits_only = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    digits_only.then_some(Some(digits))
}
