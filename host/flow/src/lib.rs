//! placeholder
pub mod drr;
pub mod ratelimit;
pub mod topic;
