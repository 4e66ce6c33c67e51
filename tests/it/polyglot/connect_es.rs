//! The HTTP door through Connect's own JavaScript runtime (connect-es, on Node): its
//! `node --test` suite (`tests/it/polyglot/connect_es/door.test.mjs`) calls claimd in the
//! Connect protocol (JSON over HTTP/1.1, binary over HTTP/2) and in gRPC-Web over HTTP/1.1,
//! against claimd on its embedded store and on PostgreSQL. The service comes from claimd's
//! descriptor set, written to a file here, so no code is generated. The packages come from
//! the suite's lock file (`npm ci`, on first use).

use super::{node, tools};
use std::process::Command;

fn connect_es_suite(live: &tools::Live) {
    node::require_node();
    let package = tools::npm_ci("tests/it/polyglot/connect_es");
    // A test cannot run without somewhere to put the descriptor set.
    let dir = tempfile::tempdir().expect("temp dir");
    let fds = dir.path().join("claimd.binpb");
    std::fs::write(&fds, claimd::pb::FILE_DESCRIPTOR_SET).expect("descriptor set written");
    // Blocking is fine here: claimd is another process, nothing on this runtime must run.
    tools::run(
        Command::new("node")
            .args(["--test", "--test-reporter=spec", "door.test.mjs"])
            .current_dir(&package)
            .env("CLAIMD_URL", format!("http://{}", live.target()))
            .env("CLAIMD_FDS", &fds),
        "node --test in tests/it/polyglot/connect_es",
    );
}

#[tokio::test]
async fn connect_es_calls_claimd_in_connect_and_grpc_web_on_the_embedded_store() {
    let live = tools::Live::embedded().await;
    connect_es_suite(&live);
}

#[tokio::test]
async fn connect_es_calls_claimd_in_connect_and_grpc_web_on_postgres() {
    let live = tools::Live::postgres().await;
    connect_es_suite(&live);
}
