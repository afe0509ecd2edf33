//! askgate integration tests: real servers on ephemeral ports, real gRPC clients and
//! real `askgate` processes. One test binary (one link) with a module per area.

mod abort;
mod answers;
mod cli;
mod errors;
mod fanout;
mod first_wins;
mod lagging;
mod replay;
mod service;
mod shutdown;
mod support;
