//! Which RPCs binary logging records, and how much of each: grpc-go's
//! `GRPC_BINARY_LOG_FILTER` syntax (gRFC A16), parsed into a [`Filter`]
//! (whose docs give the syntax), looked up per RPC as [`LogLimits`], refused
//! as a [`FilterError`].

mod parse;

use std::collections::HashMap;
use std::fmt;

use parse::Clause;

/// How much of a logged RPC to write: bytes of header metadata and bytes of
/// each message's data.
///
/// [`LogLimits::UNLIMITED`] logs a part in full; `0` still writes its entries,
/// with no metadata or message bytes (a message's length is always logged).
///
/// ```
/// use tonic_hotpath::binlog::{Filter, LogLimits};
///
/// let filter = Filter::parse("*{h:4096;m}")?;
/// assert_eq!(
///     filter.lookup("/pkg.Svc/Get"),
///     Some(LogLimits { header: 4096, message: LogLimits::UNLIMITED }),
/// );
/// # Ok::<(), tonic_hotpath::binlog::FilterError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLimits {
    /// The most bytes of metadata (keys plus values) kept in each client
    /// header, server header and trailer entry.
    pub header: u64,
    /// The most bytes of each message's data kept in its entry.
    pub message: u64,
}

impl LogLimits {
    /// No limit: the part is logged in full (grpc-go's `maxUInt`).
    ///
    /// ```
    /// use tonic_hotpath::binlog::LogLimits;
    ///
    /// assert_eq!(LogLimits::UNLIMITED, u64::MAX);
    /// ```
    pub const UNLIMITED: u64 = u64::MAX;

    /// Headers and messages in full: what a clause with no suffix logs.
    ///
    /// ```
    /// use tonic_hotpath::binlog::{Filter, LogLimits};
    ///
    /// assert_eq!(
    ///     LogLimits::full(),
    ///     LogLimits { header: LogLimits::UNLIMITED, message: LogLimits::UNLIMITED },
    /// );
    /// assert_eq!(Filter::parse("pkg.Svc/Get")?.lookup("/pkg.Svc/Get"), Some(LogLimits::full()));
    /// # Ok::<(), tonic_hotpath::binlog::FilterError>(())
    /// ```
    #[must_use]
    pub const fn full() -> Self {
        Self {
            header: Self::UNLIMITED,
            message: Self::UNLIMITED,
        }
    }
}

/// Which RPCs to log and how much of each, parsed from grpc-go's
/// `GRPC_BINARY_LOG_FILTER` syntax.
///
/// A filter is one or more clauses separated by `,`, with no spaces. A
/// method name is ASCII letters, digits and `_`; a service name may also
/// hold `.` and `/` (a clause splits at its last `/`, as a path does).
///
///
/// | Clause | Selects |
/// |---|---|
/// | `*` | every method |
/// | `Service/*` | every method of `Service` (its full name: `pkg.Service`) |
/// | `Service/Method` | that one method |
/// | `-Service/Method` | not that method (an exclusion) |
///
/// The first three may end with a suffix saying how much to log: header
/// metadata (`h`) and message data (`m`), in bytes. A part that the suffix
/// names without a number is logged in full; a part it leaves out is logged
/// with no bytes (its entries are still written, with their lengths).
///
/// | Suffix | Header bytes | Message bytes |
/// |---|---|---|
/// | none | all | all |
/// | `{h}` / `{h:N}` | all / `N` | 0 |
/// | `{m}` / `{m:M}` | 0 | all / `M` |
/// | `{h;m}`, `{h:N;m}`, `{h;m:M}`, `{h:N;m:M}` | all or `N` | all or `M` |
///
/// For each RPC the most specific clause decides: its `Service/Method`
/// clause, else its exclusion (not logged), else its `Service/*` clause,
/// else `*`, else the RPC is not logged. A filter names each method,
/// service and `*` at most once, and never both logs and excludes a
/// method: such a filter, or any other malformed one, is a [`FilterError`]
/// naming the clause at fault. (grpc-go logs nothing at all then; gRFC A16
/// asks that a process refuse it, so the error is the application's to
/// act on.)
///
/// ```
/// use tonic_hotpath::binlog::{Filter, LogLimits};
///
/// let filter = Filter::parse("pkg.Svc/*,-pkg.Svc/Health,pkg.Svc/Upload{h;m:256}")?;
/// assert_eq!(filter.lookup("/pkg.Svc/Get"), Some(LogLimits::full()));
/// assert_eq!(filter.lookup("/pkg.Svc/Health"), None);
/// assert_eq!(
///     filter.lookup("/pkg.Svc/Upload"),
///     Some(LogLimits { header: LogLimits::UNLIMITED, message: 256 }),
/// );
/// assert_eq!(filter.lookup("/other.Svc/Get"), None);
///
/// // With `*{h}`: every other method, headers in full, no message bytes.
/// let filter = Filter::parse("*{h},pkg.Svc/*,-pkg.Svc/Health")?;
/// assert_eq!(
///     filter.lookup("/other.Svc/Get"),
///     Some(LogLimits { header: LogLimits::UNLIMITED, message: 0 }),
/// );
/// assert_eq!(filter.lookup("/pkg.Svc/Health"), None);
/// # Ok::<(), tonic_hotpath::binlog::FilterError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Filter {
    /// `Service/Method` clauses (`Some`) and exclusions (`None`), keyed by
    /// `Service/Method`: the request path without its leading `/`. A method
    /// is never both (the parser refuses it), so one map serves both.
    methods: HashMap<Box<str>, Option<LogLimits>>,
    /// `Service/*` clauses, keyed by service.
    services: HashMap<Box<str>, LogLimits>,
    /// The `*` clause.
    all: Option<LogLimits>,
}

impl Filter {
    /// The environment variable [`Filter::from_env`] reads, as grpc-go does.
    pub const ENV_VAR: &'static str = "GRPC_BINARY_LOG_FILTER";

    /// Parses a filter such as `pkg.Svc/*,-pkg.Svc/Health{h}`.
    ///
    /// # Errors
    ///
    /// A [`FilterError`] naming the first clause that is malformed or
    /// conflicts with an earlier one; an empty `config` is
    /// [`FilterError::Empty`].
    ///
    /// ```
    /// use tonic_hotpath::binlog::{Filter, FilterError, LogLimits};
    ///
    /// let filter = Filter::parse("pkg.Svc/*,-pkg.Svc/Health")?;
    /// assert_eq!(filter.lookup("/pkg.Svc/Get"), Some(LogLimits::full()));
    /// assert_eq!(filter.lookup("/pkg.Svc/Health"), None);
    ///
    /// // An exclusion takes no suffix.
    /// let err = Filter::parse("pkg.Svc/*,-pkg.Svc/Health{h}").unwrap_err();
    /// assert!(matches!(err, FilterError::ExclusionSuffix { .. }));
    /// assert_eq!(
    ///     err.to_string(),
    ///     r#"invalid binary log filter: clause "-pkg.Svc/Health{h}": an exclusion cannot have a {..} suffix"#,
    /// );
    /// # Ok::<(), FilterError>(())
    /// ```
    pub fn parse(config: &str) -> Result<Self, FilterError> {
        if config.is_empty() {
            return Err(FilterError::Empty);
        }
        let mut filter = Self {
            methods: HashMap::new(),
            services: HashMap::new(),
            all: None,
        };
        for (index, text) in config.split(',').enumerate() {
            filter.add(index + 1, text)?;
        }
        Ok(filter)
    }

    /// Adds one clause, refusing what grpc-go's `logger.set*` refuse.
    fn add(&mut self, position: usize, text: &str) -> Result<(), FilterError> {
        let clause = || text.to_owned();
        match parse::clause(position, text)? {
            Clause::All(limits) => {
                if self.all.is_some() {
                    return Err(FilterError::DuplicateAll { clause: clause() });
                }
                self.all = Some(limits);
            }
            Clause::Service(service, limits) => {
                if self.services.contains_key(service) {
                    return Err(FilterError::DuplicateService {
                        clause: clause(),
                        service: service.to_owned(),
                    });
                }
                self.services.insert(service.into(), limits);
            }
            Clause::Method(method, rule) => {
                if let Some(earlier) = self.methods.get(method) {
                    let method = method.to_owned();
                    return Err(match (earlier, rule) {
                        (Some(_), Some(_)) => FilterError::DuplicateMethod {
                            clause: clause(),
                            method,
                        },
                        (None, None) => FilterError::DuplicateExclusion {
                            clause: clause(),
                            method,
                        },
                        _ => FilterError::LoggedAndExcluded {
                            clause: clause(),
                            method,
                        },
                    });
                }
                self.methods.insert(method.into(), rule);
            }
        }
        Ok(())
    }

    /// Reads the filter from `GRPC_BINARY_LOG_FILTER` ([`Filter::ENV_VAR`]).
    ///
    /// `Ok(None)` when the variable is unset or empty: no binary logging, as
    /// in grpc-go.
    ///
    /// # Errors
    ///
    /// The [`FilterError`] of [`Filter::parse`], or
    /// [`FilterError::NotUnicode`] when the value is not UTF-8.
    ///
    /// ```no_run
    /// use tonic_hotpath::binlog::Filter;
    ///
    /// fn main() -> Result<(), Box<dyn std::error::Error>> {
    ///     // `?`: refuse to start with an invalid filter, as gRFC A16 asks.
    ///     match Filter::from_env()? {
    ///         Some(filter) => { /* install binary logging with `filter` */ }
    ///         None => { /* binary logging is off */ }
    ///     }
    ///     Ok(())
    /// }
    /// ```
    pub fn from_env() -> Result<Option<Self>, FilterError> {
        let Some(value) = std::env::var_os(Self::ENV_VAR) else {
            return Ok(None);
        };
        if value.is_empty() {
            return Ok(None);
        }
        let config = value.to_str().ok_or(FilterError::NotUnicode)?;
        Self::parse(config).map(Some)
    }

    /// Logs every method in full: the filter `*`.
    ///
    /// ```
    /// use tonic_hotpath::binlog::{Filter, LogLimits};
    ///
    /// assert_eq!(Filter::all().lookup("/pkg.Svc/Get"), Some(LogLimits::full()));
    /// ```
    #[must_use]
    pub fn all() -> Self {
        Self {
            methods: HashMap::new(),
            services: HashMap::new(),
            all: Some(LogLimits::full()),
        }
    }

    /// How much of the RPC `method` to log, `None` to log none of it.
    ///
    /// `method` is the request path, `/Service/Method` (the request URI's
    /// path, as tonic routes on it); the service is everything between the
    /// leading `/` and the last `/`. A path without
    /// a leading `/` or without a second `/` is not logged. Allocates
    /// nothing.
    ///
    /// ```
    /// use tonic_hotpath::binlog::{Filter, LogLimits};
    ///
    /// let filter = Filter::parse("*{h:1;m:2},pkg.Svc/*{m},pkg.Svc/Get")?;
    /// assert_eq!(filter.lookup("/pkg.Svc/Get"), Some(LogLimits::full()));
    /// assert_eq!(
    ///     filter.lookup("/pkg.Svc/Put"),
    ///     Some(LogLimits { header: 0, message: LogLimits::UNLIMITED }),
    /// );
    /// assert_eq!(filter.lookup("/a.B/C"), Some(LogLimits { header: 1, message: 2 }));
    /// assert_eq!(filter.lookup("pkg.Svc/Get"), None);
    /// # Ok::<(), tonic_hotpath::binlog::FilterError>(())
    /// ```
    #[must_use]
    pub fn lookup(&self, method: &str) -> Option<LogLimits> {
        // grpc-go's grpcutil.ParseMethod, then its methods, exclusions,
        // services and `*` in that order. Its method key, service + "/" +
        // method, is the path without its leading '/'.
        let full = method.strip_prefix('/')?;
        let slash = full.rfind('/')?;
        if !self.methods.is_empty()
            && let Some(rule) = self.methods.get(full)
        {
            return *rule;
        }
        if !self.services.is_empty()
            && let Some(limits) = self.services.get(&full[..slash])
        {
            return Some(*limits);
        }
        self.all
    }
}

/// Why a binary log filter was refused: the clause at fault, and what is
/// wrong with it.
///
/// ```
/// use tonic_hotpath::binlog::{Filter, FilterError};
///
/// let err = Filter::parse("pkg.Svc/Get,pkg.Svc/Get{h}").unwrap_err();
/// assert_eq!(
///     err,
///     FilterError::DuplicateMethod {
///         clause: "pkg.Svc/Get{h}".into(),
///         method: "pkg.Svc/Get".into(),
///     },
/// );
/// assert!(err.to_string().contains(r#"duplicate method "pkg.Svc/Get""#));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterError {
    /// The filter is empty. (An empty `GRPC_BINARY_LOG_FILTER` is no
    /// filter: [`Filter::from_env`] returns `Ok(None)`.)
    Empty,
    /// The clause at this position (counted from 1) is empty: two commas
    /// in a row, or a comma at either end.
    EmptyClause {
        /// The clause's position, counted from 1.
        position: usize,
    },
    /// A clause that is none of `*`, `Service/*`, `Service/Method` and
    /// `-Service/Method`: a service is ASCII letters, digits, `_`, `.` and
    /// `/`, a method ASCII letters, digits and `_`.
    Syntax {
        /// The clause.
        clause: String,
    },
    /// `*/Method`: a method is named with its service.
    AnyServiceMethod {
        /// The clause.
        clause: String,
    },
    /// A suffix other than `{h}`, `{h:N}`, `{m}`, `{m:M}`, `{h;m}`,
    /// `{h:N;m}`, `{h;m:M}` and `{h:N;m:M}`.
    Suffix {
        /// The clause.
        clause: String,
        /// What follows the method (or `*`).
        suffix: String,
    },
    /// A byte count above `u64::MAX`.
    Number {
        /// The clause.
        clause: String,
        /// The digits.
        number: String,
    },
    /// `-Service/*`: an exclusion names one method.
    ExcludedService {
        /// The clause.
        clause: String,
    },
    /// `-Service/Method{..}`: an exclusion has no suffix.
    ExclusionSuffix {
        /// The clause.
        clause: String,
    },
    /// A second `*` clause.
    DuplicateAll {
        /// The clause.
        clause: String,
    },
    /// A second `Service/*` clause for the same service.
    DuplicateService {
        /// The clause.
        clause: String,
        /// The service.
        service: String,
    },
    /// A second `Service/Method` clause for the same method.
    DuplicateMethod {
        /// The clause.
        clause: String,
        /// The method, `Service/Method`.
        method: String,
    },
    /// A second exclusion of the same method.
    DuplicateExclusion {
        /// The clause.
        clause: String,
        /// The method, `Service/Method`.
        method: String,
    },
    /// A method both logged (`Service/Method`) and excluded
    /// (`-Service/Method`), in either order.
    LoggedAndExcluded {
        /// The later of the two clauses.
        clause: String,
        /// The method, `Service/Method`.
        method: String,
    },
    /// `GRPC_BINARY_LOG_FILTER` is not UTF-8 ([`Filter::from_env`]).
    NotUnicode,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid binary log filter")?;
        match self {
            Self::Empty => f.write_str(
                ": it is empty (give at least one clause, such as \"*\"; \
                 an empty GRPC_BINARY_LOG_FILTER turns binary logging off)",
            ),
            Self::EmptyClause { position } => write!(
                f,
                ": clause {position} is empty (two commas in a row, or a comma at either end)"
            ),
            Self::Syntax { clause } => {
                write!(
                    f,
                    ": clause {clause:?} is none of \"*\", \"Service/*\", \"Service/Method\" \
                     and \"-Service/Method\" (a service is ASCII letters, digits, '_', '.' \
                     and '/'; a method ASCII letters, digits and '_')"
                )?;
                if clause.contains(char::is_whitespace) {
                    f.write_str("; remove the whitespace")?;
                }
                Ok(())
            }
            Self::AnyServiceMethod { clause } => write!(
                f,
                ": clause {clause:?}: \"*/Method\" is not allowed (name the method with its \
                 service, \"Service/Method\", or log every method with \"*\")"
            ),
            Self::Suffix { clause, suffix } => {
                write!(
                    f,
                    ": clause {clause:?}: {suffix:?} is not a suffix: use {{h}}, {{h:N}}, \
                     {{m}}, {{m:M}}, {{h;m}}, {{h:N;m}}, {{h;m:M}} or {{h:N;m:M}}"
                )?;
                if suffix.starts_with('{') && !suffix.contains('}') {
                    f.write_str(" (a ',' ends the clause: separate h and m with ';')")?;
                }
                Ok(())
            }
            Self::Number { clause, number } => write!(
                f,
                ": clause {clause:?}: {number} bytes is more than the largest limit, {} \
                 (leave the number out to log in full)",
                u64::MAX
            ),
            Self::ExcludedService { clause } => write!(
                f,
                ": clause {clause:?}: an exclusion names one method, \"-Service/Method\", \
                 not \"-Service/*\""
            ),
            Self::ExclusionSuffix { clause } => write!(
                f,
                ": clause {clause:?}: an exclusion cannot have a {{..}} suffix"
            ),
            Self::DuplicateAll { clause } => write!(
                f,
                ": clause {clause:?}: duplicate \"*\" (give it once, with one suffix)"
            ),
            Self::DuplicateService { clause, service } => write!(
                f,
                ": clause {clause:?}: duplicate service {service:?} (give \"{service}/*\" once)"
            ),
            Self::DuplicateMethod { clause, method } => write!(
                f,
                ": clause {clause:?}: duplicate method {method:?} (give it once, with one suffix)"
            ),
            Self::DuplicateExclusion { clause, method } => {
                write!(f, ": clause {clause:?}: duplicate exclusion of {method:?}")
            }
            Self::LoggedAndExcluded { clause, method } => write!(
                f,
                ": clause {clause:?}: method {method:?} is both logged and excluded"
            ),
            Self::NotUnicode => write!(f, ": {} is not UTF-8", Filter::ENV_VAR),
        }
    }
}

impl std::error::Error for FilterError {}
