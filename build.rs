//! Compiles `proto/claimd/v1/claims.proto` with `protox` (pure Rust, no `protoc` needed) and
//! generates the tonic server and client. The encoded descriptor set is written to `OUT_DIR`
//! for gRPC server reflection, and `proto/VERSION` is passed on as `CLAIMD_PROTO_VERSION`.

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/claimd/v1/claims.proto";
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile([proto], ["proto"])?;
    // The contract's version, for `claimd --version` beside the binary's own.
    let version = std::fs::read_to_string("proto/VERSION")?;
    println!("cargo:rustc-env=CLAIMD_PROTO_VERSION={}", version.trim());
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out_dir.join("claimd_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
