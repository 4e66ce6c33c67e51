//! Compiles the contract, `proto/claimd/v1/claims.proto` at the root of the repository,
//! with `protox` (pure Rust, no `protoc`) into the tonic client alone.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let proto = root.join("claimd/v1/claims.proto");
    println!("cargo:rerun-if-changed={}", root.display());
    let fds = protox::compile([&proto], [&root])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        .compile_fds(fds)?;
    Ok(())
}
