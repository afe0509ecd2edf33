//! The `askgate` binary: the command line over the server (`askgate serve`) and the
//! client subcommands, all in [`cli`]. See docs/cli.md for the commands,
//! docs/architecture.md for how the crates are layered, and README.md for the tour.

pub mod cli;
