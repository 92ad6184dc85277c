//! `stats` (in progress).
