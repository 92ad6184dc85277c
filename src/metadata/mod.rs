//! `metadata` (in progress).
