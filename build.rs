//! Compiles `proto/claimd/v1/claims.proto` with `protox` (pure Rust, no `protoc` needed) and
//! generates the tonic server and client. The encoded descriptor set is written to `OUT_DIR`
//! for gRPC server reflection.

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/claimd/v1/claims.proto";
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile([proto], ["proto"])?;
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out_dir.join("claimd_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
