//! Combined gRPC stats handlers (placeholder while being built).
pub mod frame;
