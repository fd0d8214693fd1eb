//! placeholder
pub mod topic;
