//! The `claimd` binary: parses the command line and hands over to the library.

use claimd::config::{Cli, Command, Config};
use claimd::server::Application;
use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        None => serve(cli.serve).await,
        Some(Command::Serve(args)) => serve(args).await,
        Some(Command::Migrate(db)) => {
            claimd::telemetry::init(claimd::config::LogFormat::Text);
            let store = claimd::store::open(&db.url()?, &db.store_options()).await?;
            store.migrate().await?;
            tracing::info!("migrations applied");
            Ok(())
        }
    }
}

async fn serve(args: claimd::config::ServeArgs) -> anyhow::Result<()> {
    claimd::telemetry::init(args.log_format);
    let config = Config::from_args(&args)?;
    let app = Application::build(config).await?;
    tracing::info!(listen = %app.local_addr(), "claimd bound");
    app.run_until(shutdown_signal()).await
}

/// Completes at the first SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
