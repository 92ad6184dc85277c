//! The overrides file (feature `limits-file`): Cortex's runtime
//! configuration file reduced to this layer's limits, parsed (its format
//! is on [`parse_overrides`]), and its errors.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use saphyr::{MarkedYaml, Scalar, YamlData, YamlLoader};
use saphyr_parser::Parser;

use super::config::{Limits, Rate};
use crate::tenant::OrgId;

/// Why an overrides file was not applied: it could not be read, or its
/// content is not a valid overrides file (with the line).
#[derive(Debug)]
pub struct LimitsFileError {
    path: PathBuf,
    kind: ErrorKind,
}

#[derive(Debug)]
enum ErrorKind {
    Read(io::Error),
    Invalid(OverridesError),
}

impl LimitsFileError {
    /// `path` could not be read.
    pub(crate) fn read(path: &Path, error: io::Error) -> Self {
        Self {
            path: path.to_owned(),
            kind: ErrorKind::Read(error),
        }
    }

    /// `path`'s content is not a valid overrides file.
    pub(crate) fn invalid(path: &Path, error: OverridesError) -> Self {
        Self {
            path: path.to_owned(),
            kind: ErrorKind::Invalid(error),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl fmt::Display for LimitsFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Read(error) => write!(
                f,
                "cannot read overrides file {}: {error}",
                self.path.display()
            ),
            ErrorKind::Invalid(error) => {
                write!(f, "overrides file {}: {error}", self.path.display())
            }
        }
    }
}

impl std::error::Error for LimitsFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Read(error) => Some(error),
            ErrorKind::Invalid(error) => Some(error),
        }
    }
}

/// What is wrong with an overrides document, and on which line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverridesError {
    line: usize,
    message: String,
}

impl OverridesError {
    /// `message` about line `line`.
    pub(crate) fn at_line(line: usize, message: String) -> Self {
        Self { line, message }
    }

    /// The line (1-based) of the offending node.
    pub fn line(&self) -> usize {
        self.line
    }
}

impl fmt::Display for OverridesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for OverridesError {}

/// The overrides of an overrides file's text, each laid over `defaults`,
/// in the file's order.
///
/// The format, Cortex's runtime configuration file reduced to this
/// layer's limits:
///
/// ```yaml
/// overrides:
///   team-a:            # a tenant id (quote ids YAML would read as numbers: "007")
///     max_in_flight: 8 # null: no in-flight limit; 0 refuses every call
///     rate: 100        # calls per second; null: no rate limit
///     burst: 200       # at least 1
///     work_rate: 10000 # work units per second (TenantBudget::charge); null: none
///     work_burst: 50000
///   team-b:
///     rate: 5          # burst: the defaults' burst, or the rate rounded up
/// ```
///
/// (`work_rate` and `work_burst` follow the rules of `rate` and `burst`:
/// Cortex's `ingestion_rate` and `ingestion_burst_size`.)
///
/// As in Cortex, a tenant's entry is laid over the defaults: a key left
/// out keeps the default limit. Other top-level sections (a Cortex runtime
/// configuration has several) are ignored; within a tenant, an unknown key
/// is an error, so that a typo does not silently mean "no limit". The
/// file must be valid YAML 1.2 (saphyr), with unique keys; an empty file
/// has no overrides.
///
/// ```
/// use tonic_hotpath::limits::{Limits, parse_overrides};
///
/// let defaults = Limits::unlimited().with_max_in_flight(4);
/// let overrides = parse_overrides("overrides:\n  team-a:\n    rate: 10\n", defaults)?;
/// let (tenant, limits) = &overrides[0];
/// assert_eq!(tenant.as_str(), "team-a");
/// assert_eq!(limits.max_in_flight, Some(4)); // from the defaults
/// assert_eq!(limits.rate.map(|rate| (rate.per_second, rate.burst)), Some((10.0, 10)));
///
/// let error = parse_overrides("overrides:\n  team-a:\n    burts: 3\n", defaults).unwrap_err();
/// assert_eq!(error.line(), 3);
/// # Ok::<(), tonic_hotpath::limits::OverridesError>(())
/// ```
///
/// # Errors
///
/// [`OverridesError`] for invalid YAML, an invalid tenant id, an unknown
/// key, or a value out of range.
pub fn parse_overrides(
    text: &str,
    defaults: Limits,
) -> Result<Vec<(OrgId, Limits)>, OverridesError> {
    let mut loader = YamlLoader::<MarkedYaml<'_>>::default();
    // Keep scalars as written: a tenant id `007` stays `007`.
    loader.early_parse(false);
    let loaded = Parser::new_from_str(text).load(&mut loader, true);
    if let Some(error) = loaded.err().or_else(|| loader.error().cloned()) {
        return Err(OverridesError {
            line: error.marker().line(),
            message: error.info().to_owned(),
        });
    }
    let documents = loader.into_documents();
    let root = match documents.as_slice() {
        [] => return Ok(Vec::new()),
        [root] => root,
        [_, second, ..] => return Err(at(second, "expected one YAML document".into())),
    };
    let top = match &root.data {
        YamlData::Mapping(top) => top,
        _ if is_null(root) => return Ok(Vec::new()),
        _ => return Err(at(root, "the top level must be a mapping".into())),
    };
    let Some(overrides) = top
        .iter()
        .find_map(|(key, value)| (text_of(key) == Some("overrides")).then_some(value))
    else {
        return Ok(Vec::new());
    };
    let tenants = match &overrides.data {
        YamlData::Mapping(tenants) => tenants,
        _ if is_null(overrides) => return Ok(Vec::new()),
        _ => {
            return Err(at(
                overrides,
                "`overrides` must map tenant ids to their limits".into(),
            ));
        }
    };
    tenants
        .iter()
        .map(|(key, value)| {
            let id = text_of(key).ok_or_else(|| at(key, "a tenant id must be a scalar".into()))?;
            let tenant =
                OrgId::new(id).map_err(|error| at(key, format!("tenant {id:?}: {error}")))?;
            let limits = tenant_limits(value, defaults)
                .map_err(|(node, message)| at(node, format!("tenant {id:?}: {message}")))?;
            Ok((tenant, limits))
        })
        .collect()
}

/// A problem at `node`.
type NodeError<'a, 'input> = (&'a MarkedYaml<'input>, String);

/// One tenant's entry laid over `defaults`.
fn tenant_limits<'a, 'input>(
    entry: &'a MarkedYaml<'input>,
    defaults: Limits,
) -> Result<Limits, NodeError<'a, 'input>> {
    let fields = match &entry.data {
        YamlData::Mapping(fields) => fields,
        _ if is_null(entry) => return Ok(defaults),
        _ => return Err((entry, "expected a mapping of limits".into())),
    };
    let mut max_in_flight = defaults.max_in_flight;
    let mut rate = RateKeys::default();
    let mut work = RateKeys::default();
    for (key, value) in fields {
        match text_of(key) {
            Some("max_in_flight") => {
                max_in_flight = match scalar(value) {
                    Some(Scalar::Null) => None,
                    Some(Scalar::Integer(n)) => Some(
                        u32::try_from(n)
                            .map_err(|_| (value, format!("max_in_flight {n} is out of range")))?,
                    ),
                    _ => return Err((value, "max_in_flight must be an integer or null".into())),
                };
            }
            Some(name @ "rate") => rate.per_second = Some(per_second(name, value)?),
            Some(name @ "burst") => rate.burst = burst(name, value)?,
            Some(name @ "work_rate") => work.per_second = Some(per_second(name, value)?),
            Some(name @ "work_burst") => work.burst = burst(name, value)?,
            other => {
                return Err((
                    key,
                    format!(
                        "unknown key {:?} (expected max_in_flight, rate, burst, work_rate or \
                         work_burst)",
                        other.unwrap_or("?")
                    ),
                ));
            }
        }
    }
    Ok(Limits {
        max_in_flight,
        rate: rate.over(entry, defaults.rate, "burst without a rate")?,
        work_rate: work.over(entry, defaults.work_rate, "work_burst without a work_rate")?,
    })
}

/// A rate's two keys as a tenant's entry gives them: the rate (`None`
/// when left out, `Some(None)` for `null`) and the burst.
#[derive(Default)]
struct RateKeys {
    per_second: Option<Option<f64>>,
    burst: Option<u32>,
}

impl RateKeys {
    /// The rate these keys give laid over `default`: a key left out keeps
    /// the default's; a rate without a burst takes the default's burst, or
    /// the rate rounded up.
    fn over<'a, 'input>(
        self,
        entry: &'a MarkedYaml<'input>,
        default: Option<Rate>,
        burst_alone: &str,
    ) -> Result<Option<Rate>, NodeError<'a, 'input>> {
        Ok(match (self.per_second, self.burst) {
            (None, None) => default,
            (Some(None), None) => None,
            (None | Some(None), Some(burst)) => {
                let per_second = default
                    .filter(|_| self.per_second.is_none())
                    .map(|rate| rate.per_second)
                    .ok_or((entry, burst_alone.to_owned()))?;
                Some(valid_rate(entry, per_second, burst)?)
            }
            (Some(Some(per_second)), burst) => {
                let burst = burst
                    .or(default.map(|rate| rate.burst))
                    .unwrap_or_else(|| per_second.ceil().clamp(1.0, f64::from(u32::MAX)) as u32);
                Some(valid_rate(entry, per_second, burst)?)
            }
        })
    }
}

/// A rate key's value: a number, or `null` (no such limit).
fn per_second<'a, 'input>(
    name: &str,
    value: &'a MarkedYaml<'input>,
) -> Result<Option<f64>, NodeError<'a, 'input>> {
    match scalar(value) {
        Some(Scalar::Null) => Ok(None),
        Some(Scalar::Integer(n)) => Ok(Some(n as f64)),
        Some(Scalar::FloatingPoint(x)) => Ok(Some(x.into_inner())),
        _ => Err((value, format!("{name} must be a number or null"))),
    }
}

/// A burst key's value: an integer of at least 1, or `null` (left out).
fn burst<'a, 'input>(
    name: &str,
    value: &'a MarkedYaml<'input>,
) -> Result<Option<u32>, NodeError<'a, 'input>> {
    match scalar(value) {
        Some(Scalar::Null) => Ok(None),
        Some(Scalar::Integer(n)) => u32::try_from(n)
            .ok()
            .filter(|&n| n >= 1)
            .map(Some)
            .ok_or_else(|| (value, format!("{name} {n} is out of range"))),
        _ => Err((value, format!("{name} must be an integer"))),
    }
}

fn valid_rate<'a, 'input>(
    entry: &'a MarkedYaml<'input>,
    per_second: f64,
    burst: u32,
) -> Result<Rate, NodeError<'a, 'input>> {
    Rate::new(per_second, burst).map_err(|error| (entry, error.to_string()))
}

/// The scalar at `node`, parsed by YAML 1.2's core schema (quoted scalars
/// are strings); `None` for a collection.
fn scalar<'input>(node: &MarkedYaml<'input>) -> Option<Scalar<'input>> {
    match &node.data {
        YamlData::Representation(text, style, tag) => {
            Scalar::parse_from_cow_and_metadata(text.clone(), *style, tag.as_ref())
        }
        YamlData::Value(value) => Some(value.clone()),
        _ => None,
    }
}

fn is_null(node: &MarkedYaml<'_>) -> bool {
    matches!(scalar(node), Some(Scalar::Null))
}

/// A scalar's text as written (not interpreted).
fn text_of<'a>(node: &'a MarkedYaml<'_>) -> Option<&'a str> {
    match &node.data {
        YamlData::Representation(text, ..) => Some(text),
        YamlData::Value(Scalar::String(text)) => Some(text),
        _ => None,
    }
}

fn at(node: &MarkedYaml<'_>, message: String) -> OverridesError {
    OverridesError {
        line: node.span.start.line(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> OrgId {
        OrgId::new(text).unwrap()
    }

    const DEFAULTS: Limits = Limits::unlimited().with_max_in_flight(4);

    #[test]
    fn entries_are_laid_over_the_defaults() {
        let text = "\
multi_kv_config: {}   # another runtime-config section: ignored
overrides:
  team-a:
    max_in_flight: 8
    rate: 100
    burst: 200
  \"007\":
    max_in_flight: null
    rate: 0.5
  team-c:
  team-d:
    max_in_flight: 0
";
        let overrides = parse_overrides(text, DEFAULTS).unwrap();
        let rate = |per_second, burst| Some(Rate::new(per_second, burst).unwrap());
        assert_eq!(
            overrides,
            vec![
                (
                    id("team-a"),
                    Limits {
                        max_in_flight: Some(8),
                        rate: rate(100.0, 200),
                        work_rate: None
                    }
                ),
                (
                    id("007"),
                    Limits {
                        max_in_flight: None,
                        rate: rate(0.5, 1),
                        work_rate: None
                    }
                ),
                (id("team-c"), DEFAULTS),
                (
                    id("team-d"),
                    Limits {
                        max_in_flight: Some(0),
                        rate: None,
                        work_rate: None
                    }
                ),
            ]
        );
    }

    #[test]
    fn plain_numeric_ids_keep_their_text() {
        let overrides =
            parse_overrides("overrides:\n  007: {max_in_flight: 1}\n", DEFAULTS).unwrap();
        assert_eq!(overrides[0].0, "007");
    }

    #[test]
    fn a_burst_or_a_rate_alone_takes_the_other_from_the_defaults() {
        let defaults = DEFAULTS.with_rate(Rate::new(10.0, 20).unwrap());
        let text = "overrides:\n  a: {burst: 50}\n  b: {rate: 30}\n  c: {rate: null}\n";
        let overrides = parse_overrides(text, defaults).unwrap();
        let rates: Vec<_> = overrides
            .iter()
            .map(|(_, limits)| limits.rate.map(|rate| (rate.per_second, rate.burst)))
            .collect();
        assert_eq!(rates, [Some((10.0, 50)), Some((30.0, 20)), None]);
    }

    #[test]
    fn work_rates_follow_the_rate_rules_and_leave_the_call_rate_alone() {
        let defaults = DEFAULTS
            .with_rate(Rate::new(10.0, 20).unwrap())
            .with_work_rate(Rate::new(1000.0, 5000).unwrap());
        let text = "overrides:\n  a: {work_burst: 9000}\n  b: {work_rate: 300}\n  \
                    c: {work_rate: null}\n  d: {work_rate: 2.5, work_burst: 4}\n  e: {}\n";
        let overrides = parse_overrides(text, defaults).unwrap();
        let work: Vec<_> = overrides
            .iter()
            .map(|(_, limits)| limits.work_rate.map(|rate| (rate.per_second, rate.burst)))
            .collect();
        assert_eq!(
            work,
            [
                Some((1000.0, 9000)),
                Some((300.0, 5000)),
                None,
                Some((2.5, 4)),
                Some((1000.0, 5000))
            ]
        );
        assert!(
            overrides
                .iter()
                .all(|(_, limits)| limits.rate == defaults.rate)
        );
        // Without a default work rate, a rate alone takes its own burst.
        let overrides = parse_overrides("overrides:\n  a: {work_rate: 7.5}\n", DEFAULTS).unwrap();
        let rate = overrides[0].1.work_rate.unwrap();
        assert_eq!((rate.per_second, rate.burst), (7.5, 8));
    }

    #[test]
    fn empty_documents_have_no_overrides() {
        for text in ["", "# nothing\n", "overrides:\n", "other: 1\n", "~\n"] {
            assert_eq!(parse_overrides(text, DEFAULTS).unwrap(), vec![], "{text:?}");
        }
    }

    #[test]
    fn errors_name_the_line_the_tenant_and_the_problem() {
        let cases = [
            (
                "overrides:\n  a:\n    burts: 3\n",
                3,
                "unknown key \"burts\"",
            ),
            ("overrides:\n  a:\n    rate: -1\n", 3, "above 0"),
            (
                "overrides:\n  a:\n    rate: fast\n",
                3,
                "rate must be a number",
            ),
            (
                "overrides:\n  a:\n    max_in_flight: -2\n",
                3,
                "out of range",
            ),
            (
                "overrides:\n  a:\n    burst: 0\n",
                3,
                "burst 0 is out of range",
            ),
            (
                "overrides:\n  a:\n    burst: 5\n",
                3,
                "burst without a rate",
            ),
            (
                "overrides:\n  a b:\n    rate: 1\n",
                2,
                "unsupported character ' '",
            ),
            ("overrides:\n  a: 1\n  a: 2\n", 3, "duplicate"),
            (
                "overrides:\n  a:\n    work_burst: 5\n",
                3,
                "work_burst without a work_rate",
            ),
            ("overrides:\n  a:\n    work_rate: 0\n", 3, "above 0"),
            (
                "overrides:\n  a:\n    work_burst: -1\n",
                3,
                "work_burst -1 is out of range",
            ),
            ("overrides: [a, b]\n", 1, "must map tenant ids"),
            ("overrides:\n  a: {rate: 1\n", 3, ""),
            ("- a\n", 1, "top level"),
        ];
        for (text, line, needle) in cases {
            let error = parse_overrides(text, DEFAULTS).unwrap_err();
            assert_eq!(error.line(), line, "{text:?}: {error}");
            assert!(error.to_string().contains(needle), "{text:?}: {error}");
        }
    }
}
