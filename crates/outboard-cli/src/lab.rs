//! `outboard lab` and the hidden `outboard relay` (being built).
use clap::{Args, Subcommand};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum LabCommand {
    /// Create a lab.
    Up,
}

#[derive(Args, Debug)]
pub struct RelayArgs {}

pub fn run(_cmd: LabCommand) -> ExitCode {
    ExitCode::from(1)
}

pub fn relay(_args: &RelayArgs) -> ExitCode {
    ExitCode::from(1)
}
