//! The tenant tests, one binary (`cargo test --test tenant`), each former
//! test file a module: `tenant_limits_file` and `tenant_limits_file_log`
//! need the `limits-file` feature, `tenant_limits_otel` the `otel` feature,
//! `tenant_limits_file_otel` both, and `tenant_limits_operator` the
//! `otel`, `channelz` and `binlog` features, so they are built only with
//! them.

/// For `tenant_alloc` and `tenant_limits_alloc`; it counts per thread, so
/// the other tests of this binary, running in parallel, do not disturb
/// their counts.
#[global_allocator]
static ALLOCATOR: support::alloc_count::CountingAllocator = support::alloc_count::CountingAllocator;

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
mod tenant_overload_harness;
mod tenant_plain_http;
mod tenant_rules;
mod tenant_server_order;
