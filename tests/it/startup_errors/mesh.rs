//! The `[mesh]` table of `--config` (issue 48): a bad CIDR block or an unknown key stops
//! `claimd serve` before it serves, naming the file and the key.

use super::{assert_names, error_line, refused, serve_in};

#[tokio::test]
async fn a_bad_mesh_table_fails_the_start_naming_the_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cases = [
        (
            "[mesh]\ntrusted_proxies = [\"127.0.0.1/32\", \"10.0.0.0/33\"]\n",
            vec!["mesh.trusted_proxies[1]", "10.0.0.0/33"],
        ),
        (
            "[mesh]\ntrusted_proxies = [\"10.0.0.0/8\"]\nsend_proxy = true\n",
            vec!["mesh", "send_proxy"],
        ),
        (
            "[mesh.spiffe.\"spiffe://cluster.local/ns/a/sa/b\"]\ntenant = \"a b\"\n",
            vec!["mesh.spiffe.\"spiffe://cluster.local/ns/a/sa/b\".tenant"],
        ),
    ];
    for (i, (text, named)) in cases.into_iter().enumerate() {
        let path = dir.path().join(format!("mesh{i}.toml"));
        std::fs::write(&path, text).expect("write a test file");
        let data = tempfile::tempdir().expect("temp dir");
        let mut cmd = serve_in(data.path());
        cmd.arg("--config").arg(&path);
        let log = refused(cmd).await;
        let mut parts = vec!["--config"];
        parts.extend(named);
        let shown = path.display().to_string();
        parts.push(&shown);
        assert_names(error_line(&log), &parts);
    }
}
