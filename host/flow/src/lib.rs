//! Pure flow-control logic for Sluice: no I/O, no clocks, no runtime.
//!
//! Every algorithm here is a state machine; time comes in as an argument (`now`) so the
//! runtime, the outbox and the bus can share them and tests can drive them exactly.
#![warn(missing_docs)]

pub mod activation;
pub mod backoff;
pub mod deadline;
pub mod drr;
pub mod limiter;
pub mod mailbox;
pub mod partition;
pub mod ratelimit;
pub mod supervision;
pub mod topic;
