//! The lab (being built).
