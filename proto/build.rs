//! Compiles proto/askgate/v1/*.proto with protox (pure Rust, no system protoc) and
//! writes the encoded descriptor set next to the generated code for server reflection.

use std::{env, fs, path::PathBuf};

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["askgate/v1/askgate.proto"];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["."])?;
    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(
        out_dir.join("askgate_descriptor.bin"),
        descriptors.encode_to_vec(),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Most asks approve no action: a pointer where the action would be keeps every
        // request, pending event and call smaller.
        .boxed(".askgate.v1.AskRequest.action")
        .boxed(".askgate.v1.Requested.action")
        // So do most asks name no approvers.
        .boxed(".askgate.v1.AskRequest.approvers")
        .boxed(".askgate.v1.Requested.approvers")
        // And most have no policy decision.
        .boxed(".askgate.v1.Requested.policy")
        .compile_fds(descriptors)?;
    Ok(())
}
