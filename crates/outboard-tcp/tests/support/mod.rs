//! Helpers shared by the integration tests (and, by path, the fuzz targets).
pub mod segment_driver;
pub mod transfer_driver;
