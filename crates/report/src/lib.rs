//! Report formatting.
