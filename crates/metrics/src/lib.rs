//! Benchmark output parsers.
