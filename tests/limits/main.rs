//! The limits tests that are not per tenant, one binary
//! (`cargo test --test limits`): the client's adaptive throttle
//! (`throttle`).

mod throttle;
