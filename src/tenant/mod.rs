//! `tenant` (in progress).
