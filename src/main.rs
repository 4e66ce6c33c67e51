//! The `claimd` binary: parses the command line and hands over to the library. An error
//! that ends it is printed as one line (`Error: what: why`), never with a backtrace, and
//! the exit status is 1.

use claimd::config::{Cli, Command, Config};
use claimd::seal::Sealer;
use claimd::server::Application;
use claimd::telemetry::LogFormat;
use clap::Parser;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run(Cli::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("Error: {}", one_line(&error));
            std::process::ExitCode::FAILURE
        }
    }
}

/// `error` and its causes on one line, each cause left out whose text the line already
/// holds (many errors print their cause as part of their own text).
fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        None => serve(cli.serve).await,
        Some(Command::Serve(args)) => serve(args).await,
        Some(Command::Migrate(db)) => {
            claimd::telemetry::init(LogFormat::Text)?;
            // Migrations never read or write a payload, so they need no seal keys.
            let options = db.store_options(Arc::new(Sealer::plaintext()));
            let url = db.url()?;
            let store = claimd::config::open_store(&url, &options).await?;
            claimd::config::migrate(store.as_ref(), &url).await?;
            tracing::info!("migrations applied");
            Ok(())
        }
        Some(Command::Reseal(args)) => reseal(args).await,
        Some(Command::Keys(command)) => claimd::admin::keys(command).await,
        Some(Command::CheckConfig(args)) => {
            let policies = claimd::config::policies::load(&args.config)?;
            claimd::config::mesh::load(Some(&args.config))?;
            print!("{}", claimd::config::policies::render(&policies));
            Ok(())
        }
    }
}

async fn serve(args: claimd::config::ServeArgs) -> anyhow::Result<()> {
    let traces = claimd::telemetry::init(args.log_format)?;
    let grace = args.shutdown_grace;
    let signalled = Arc::new(OnceLock::new());
    let served = serve_traced(args, signalled.clone()).await;
    if let Some(provider) = traces {
        // The spans still queued get what the drain left of the grace (all of it when
        // claimd stops without a signal, as when it cannot start).
        let left = signalled
            .get()
            .map_or(grace, |at: &Instant| grace.saturating_sub(at.elapsed()));
        // Blocks until the last spans are sent or `left` is over, off the runtime's
        // threads, which the export itself needs.
        let flushed = tokio::task::spawn_blocking(move || {
            claimd::telemetry::traces::shutdown(provider, left);
        });
        let _ = flushed.await;
    }
    served
}

/// Serves until SIGTERM or SIGINT, noting in `signalled` when it came.
async fn serve_traced(
    args: claimd::config::ServeArgs,
    signalled: Arc<OnceLock<Instant>>,
) -> anyhow::Result<()> {
    // Registered first: from here on SIGHUP reloads policies instead of ending the process.
    let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    let signal = shutdown_signal()?;
    let shutdown = async move {
        signal.await;
        let _ = signalled.set(Instant::now());
    };
    let config = Config::from_args(&args)?;
    let policy_file = config.policy_file.clone();
    let app = Application::build(config).await?;
    let reload = claimd::config::policies::reload_on_sighup(hangups, app.policies(), policy_file);
    tokio::spawn(reload);
    tracing::info!(
        listen = %app.local_addr(),
        tls = app.tls_mode(),
        health_listen = ?app.health_addr(),
        metrics_listen = ?app.metrics_addr(),
        "claimd bound"
    );
    app.run_until(shutdown).await
}

/// `claimd reseal`: every row's payloads sealed again in the current format under the
/// current key; with `--dry-run`, only counted (printed on stdout). Either exits 1 when
/// rows did not open.
async fn reseal(args: claimd::config::ResealArgs) -> anyhow::Result<()> {
    claimd::telemetry::init(LogFormat::Text)?;
    let url = args.database.url()?;
    let seal = args.seal.sealer(&url, claimd::config::KeyUse::Reseal)?;
    let options = args.database.store_options(Arc::new(seal));
    let store = claimd::config::open_store(&url, &options).await?;
    let dry_run = args.dry_run;
    let total = claimd::store::reseal_all(store.as_ref(), args.batch_size, dry_run).await?;
    total.log(dry_run, "reseal done");
    if dry_run {
        println!(
            "reseal --dry-run: scanned={} rows_to_reseal={} unreadable={} old_format={} \
             old_key={} plaintext={}",
            total.scanned,
            total.rewritten,
            total.unreadable,
            total.old_format,
            total.old_key,
            total.plaintext
        );
        // A dry run is a pre-flight check: rows the real run would leave fail it as well.
        if total.unreadable > 0 {
            anyhow::bail!(
                "{} rows did not open with the configured keys (see the warnings above); the \
                 real run would leave them as they are: add the key they were sealed under",
                total.unreadable
            );
        }
        return Ok(());
    }
    if total.unreadable > 0 {
        anyhow::bail!(
            "{} rows did not open with the configured keys and were left as they are (see the \
             warnings above); add the key they were sealed under and run reseal again",
            total.unreadable
        );
    }
    Ok(())
}

/// Completes at the first SIGINT or SIGTERM. The handlers are installed when this is
/// called, before anything binds: a signal that arrives while claimd starts (its port
/// already accepting) drains it like any other, instead of killing the process.
fn shutdown_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}
