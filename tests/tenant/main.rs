//! The tenant tests, one binary (`cargo test --test tenant`), each former
//! test file a module: `tenant_limits_file` and `tenant_limits_file_log`
//! need the `limits-file` feature, `tenant_limits_otel` the `otel` feature,
//! `tenant_limits_file_otel` both, and `tenant_limits_operator` the
//! `otel`, `channelz` and `binlog` features, so they are built only with
//! them.

#[path = "../go_interop/mod.rs"]
mod go_interop;
#[path = "../limits_support/mod.rs"]
mod limits_support;
#[cfg(feature = "otel")]
#[path = "../otel_support/mod.rs"]
mod otel_support;
#[path = "../stacks/mod.rs"]
mod stacks;
/// For `tenant_limits_operator` (the in-process calls); its counting
/// allocator (the same file as `tenant_support`'s) is not this binary's.
#[cfg(all(feature = "otel", feature = "channelz", feature = "binlog"))]
#[allow(clippy::duplicate_mod)]
#[path = "../stats_harness/mod.rs"]
mod stats_harness;
#[path = "../support/mod.rs"]
mod support;
#[path = "../tenant_support/mod.rs"]
mod tenant_support;

/// For `tenant_alloc` and `tenant_limits_alloc`; it counts per thread, so
/// the other tests of this binary, running in parallel, do not disturb
/// their counts.
#[global_allocator]
static ALLOCATOR: tenant_support::CountingAllocator = tenant_support::CountingAllocator;

mod tenant;
mod tenant_alloc;
mod tenant_client_order;
mod tenant_limits;
mod tenant_limits_alloc;
mod tenant_limits_evict;
#[cfg(feature = "limits-file")]
mod tenant_limits_file;
#[cfg(feature = "limits-file")]
mod tenant_limits_file_log;
#[cfg(all(feature = "otel", feature = "limits-file"))]
mod tenant_limits_file_otel;
mod tenant_limits_interop_go;
#[cfg(all(feature = "otel", feature = "channelz", feature = "binlog"))]
mod tenant_limits_operator;
#[cfg(feature = "otel")]
mod tenant_limits_otel;
mod tenant_limits_pushback;
mod tenant_limits_pushback_go;
mod tenant_limits_release;
mod tenant_limits_work;
mod tenant_plain_http;
mod tenant_rules;
mod tenant_server_order;
