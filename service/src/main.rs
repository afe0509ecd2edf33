//! The `askgate` binary: all of it lives in [`askgate_service::cli`].

/// jemalloc, with its background threads purging freed pages: a node that held many
/// thousands of asks gives the memory back once they resolve (glibc's malloc keeps
/// it), and its size classes hold the many small allocations of a pending ask tighter.
#[cfg(not(any(target_env = "msvc", feature = "system-allocator")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    askgate_service::cli::main()
}
