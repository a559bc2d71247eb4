//! TODO(owner: helper): see link/mod.rs contract.
