//! The engine's board-command path with arbitrary command records and
//! arbitrary scribbles on the board, in one process: nothing may panic, and
//! a session that breaks the rules (or dies) is torn down, owning nothing.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    outboard_engine::host::hostile::drive_board(data);
});
