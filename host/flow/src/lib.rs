//! Pure flow-control logic for Sluice: no I/O, no clocks (time comes in as `now`).
#![warn(missing_docs)]

pub mod backoff;
pub mod limiter;
pub mod partition;
