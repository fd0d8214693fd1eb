//! placeholder
pub mod drr;
pub mod topic;
