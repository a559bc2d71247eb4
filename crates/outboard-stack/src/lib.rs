//! SKELETON
#![forbid(unsafe_code)]
