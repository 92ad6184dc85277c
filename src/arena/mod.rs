//! `arena` (in progress).
