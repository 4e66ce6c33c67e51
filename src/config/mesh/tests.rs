//! The `[mesh]` table: what it reads, and every refusal naming its key.

use super::*;

fn parse(text: &str) -> Result<MeshOptions, MeshFileError> {
    super::parse(Path::new("claimd.toml"), text)
}

fn refused(text: &str) -> String {
    let err = parse(text).unwrap_err();
    assert!(matches!(err, MeshFileError::Invalid { .. }), "{err:?}");
    err.to_string()
}

#[test]
fn a_file_without_a_mesh_table_trusts_no_one() {
    let mesh = parse("[default]\nlease = \"30s\"\n").unwrap();
    assert_eq!(mesh, MeshOptions::default());
    assert_eq!(load(None).unwrap(), MeshOptions::default());
}

#[test]
fn the_mesh_table_reads_proxies_proxy_protocol_and_spiffe_ids() {
    let mesh = parse(
        r#"
[default]
lease = "30s"
[mesh]
trusted_proxies = ["10.0.0.0/8", "127.0.0.6/32", "fd00::/8"]
proxy_protocol = "v2"
[mesh.spiffe."spiffe://cluster.local/ns/payments/sa/webhooks"]
tenant = "payments"
namespaces = ["stripe"]
[mesh.spiffe."spiffe://cluster.local/ns/ops/sa/console"]
tenant = "ops"
"#,
    )
    .unwrap();
    assert!(mesh.proxy_protocol);
    let trusted = &mesh.trusted_proxies;
    assert!(trusted.contains("10.9.8.7".parse().unwrap()));
    assert!(trusted.contains("127.0.0.6".parse().unwrap()));
    assert!(!trusted.contains("127.0.0.1".parse().unwrap()));
    let payments = &mesh.spiffe["spiffe://cluster.local/ns/payments/sa/webhooks"];
    assert_eq!(payments.tenant, "payments");
    assert_eq!(payments.namespaces, ["stripe"]);
    assert!(
        mesh.spiffe["spiffe://cluster.local/ns/ops/sa/console"]
            .namespaces
            .is_empty()
    );
}

#[test]
fn a_bad_cidr_fails_naming_its_place_in_the_list() {
    let err = refused("[mesh]\ntrusted_proxies = [\"10.0.0.0/8\", \"10.0.0/8\"]\n");
    assert!(
        err.contains("mesh.trusted_proxies[1]") && err.contains("10.0.0/8"),
        "{err}"
    );
    let err = refused("[mesh]\ntrusted_proxies = [\"10.0.0.0/40\"]\n");
    assert!(
        err.contains("mesh.trusted_proxies[0]") && err.contains("prefix"),
        "{err}"
    );
}

#[test]
fn an_unknown_key_fails_naming_it() {
    let err = refused("[mesh]\ntrusted_proxy = [\"10.0.0.0/8\"]\n");
    assert!(
        err.contains("trusted_proxy") && err.contains("mesh"),
        "{err}"
    );
    let err = refused("[mesh.spiffe.\"spiffe://a/b\"]\ntenant = \"t\"\nnamespace = [\"x\"]\n");
    assert!(err.contains("namespace"), "{err}");
}

#[test]
fn proxy_protocol_is_v2_and_needs_trusted_proxies() {
    let err = refused("[mesh]\ntrusted_proxies = [\"10.0.0.0/8\"]\nproxy_protocol = \"v1\"\n");
    assert!(
        err.contains("mesh.proxy_protocol") && err.contains("v2"),
        "{err}"
    );
    let err = refused("[mesh]\nproxy_protocol = \"v2\"\n");
    assert!(
        err.contains("mesh.proxy_protocol") && err.contains("trusted_proxies"),
        "{err}"
    );
}

#[test]
fn spiffe_ids_tenants_and_namespaces_are_checked_naming_the_key() {
    let err = refused("[mesh.spiffe.\"cluster.local/ns/a\"]\ntenant = \"t\"\n");
    assert!(err.contains("mesh.spiffe.\"cluster.local/ns/a\"") && err.contains("spiffe://"));
    let err = refused("[mesh.spiffe.\"spiffe://a/b\"]\ntenant = \"has space\"\n");
    assert!(err.contains("mesh.spiffe.\"spiffe://a/b\".tenant"), "{err}");
    let err = refused("[mesh.spiffe.\"spiffe://a/b\"]\ntenant = \"t\"\nnamespaces = [\"\"]\n");
    assert!(err.contains(".namespaces[0]"), "{err}");
    let err = refused("[mesh.spiffe.\"spiffe://a/b\"]\nnamespaces = [\"x\"]\n");
    assert!(err.contains("tenant"), "{err}");
}

#[test]
fn the_mesh_example_of_the_kubernetes_manifests_is_valid() {
    let text = include_str!("../../../deploy/kubernetes/mesh/claimd.toml");
    let mesh = parse(text).unwrap();
    assert!(mesh.trusted_proxies.contains("127.0.0.6".parse().unwrap()));
    crate::config::policies::parse(Path::new("claimd.toml"), text).unwrap();
}
