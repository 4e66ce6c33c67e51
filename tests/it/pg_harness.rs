//! The PostgreSQL test harness's own tests, run against real servers.

use crate::common::pg::{PrivateCluster, fresh_database};
use sqlx::{Connection, PgConnection};

async fn connect(url: &str) -> PgConnection {
    PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

async fn table_exists(conn: &mut PgConnection, table: &str) -> bool {
    sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
        .bind(table)
        .fetch_one(conn)
        .await
        .unwrap_or_else(|e| panic!("cannot look up table {table}: {e}"))
}

#[tokio::test]
async fn fresh_databases_are_isolated_from_each_other() {
    let first = fresh_database().await;
    let second = fresh_database().await;
    assert_ne!(first, second);

    let mut first_conn = connect(&first).await;
    sqlx::query("CREATE TABLE only_in_first (id int)")
        .execute(&mut first_conn)
        .await
        .unwrap_or_else(|e| panic!("cannot create table: {e}"));

    assert!(table_exists(&mut first_conn, "only_in_first").await);
    assert!(!table_exists(&mut connect(&second).await, "only_in_first").await);
}

#[tokio::test]
async fn a_private_cluster_refuses_connections_while_stopped_and_keeps_its_data_across_a_restart() {
    let mut cluster = PrivateCluster::start();
    let url = cluster.create_database().await;
    let mut conn = connect(&url).await;
    sqlx::raw_sql("CREATE TABLE survives (id int); INSERT INTO survives VALUES (42)")
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("cannot write data: {e}"));
    drop(conn);

    cluster.stop();
    assert!(
        PgConnection::connect(&url).await.is_err(),
        "connected to a stopped server"
    );

    cluster.restart();
    let id: i32 = sqlx::query_scalar("SELECT id FROM survives")
        .fetch_one(&mut connect(&url).await)
        .await
        .unwrap_or_else(|e| panic!("data lost across restart: {e}"));
    assert_eq!(id, 42);
}

#[tokio::test]
async fn stopping_a_private_cluster_leaves_the_shared_server_running() {
    let shared = fresh_database().await;
    let mut cluster = PrivateCluster::start();
    cluster.stop();
    connect(&shared).await;
}
