//! The `askgate` binary: all of it lives in [`askgate_service::cli`].

fn main() -> std::process::ExitCode {
    askgate_service::cli::main()
}
