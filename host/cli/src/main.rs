//! `sluice`: run a host, deploy modules into it, call actors, build guests.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use sluice_cli::target::{self, Api};
use sluice_cli::{admin, client, console, ingress};

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "A WebAssembly actor host with flow control"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start a host for the app in APP_DIR and serve its ingress and admin API. Prints one
    /// `sluice: ready` line once both listen.
    Run {
        /// Folder with app-config.toml and the modules it names.
        app_dir: PathBuf,
        /// Ingress address (`call`/`tell --host`). Port 0: any free port.
        #[arg(long, default_value = "127.0.0.1:7400")]
        listen: SocketAddr,
        /// Admin API address (`deploy`/`status --host`; loopback by default, elsewhere a token
        /// is required).
        #[arg(long, default_value = "127.0.0.1:7401")]
        admin_listen: SocketAddr,
        /// Bearer token for the admin API.
        #[arg(long, env = "SLUICE_ADMIN_TOKEN")]
        admin_token: Option<String>,
        /// The outbox database: `postgres://…` or `sqlite://PATH`. Default: SQLite in
        /// APP_DIR/.sluice/outbox.db.
        #[arg(long, env = "SLUICE_DATABASE_URL")]
        database_url: Option<String>,
        /// Export traces over OTLP/HTTP to this collector base URL (e.g.
        /// http://127.0.0.1:4318). Default: the standard OTEL_EXPORTER_OTLP_ENDPOINT if set,
        /// else no export.
        #[arg(long)]
        otlp_endpoint: Option<String>,
        /// Join the cluster on this NATS server (`nats://HOST:PORT`, comma-separated for
        /// several) with the hosts that share it; needs a Postgres --database-url. Replaces
        /// the url of the app's `[cluster]` table (docs/cluster.md).
        #[arg(long, env = "SLUICE_CLUSTER")]
        cluster: Option<String>,
        /// This host's id in the cluster [default: generated at each start].
        #[arg(long)]
        node_id: Option<String>,
    },
    /// Load new or replaced modules into a running host without restarting it. Prints the
    /// host reached, its app and each type's version; refuses a host running another app.
    Deploy {
        /// Folder with app-config.toml and the modules it names.
        app_dir: PathBuf,
        /// The host's admin API [default: $SLUICE_HOST, else the config file's context, else
        /// http://127.0.0.1:7401].
        #[arg(long)]
        host: Option<String>,
        /// Bearer token for the admin API.
        #[arg(long, env = "SLUICE_ADMIN_TOKEN")]
        token: Option<String>,
        /// Deploy even when the host runs an app of another name.
        #[arg(long)]
        force: bool,
    },
    /// Ask an actor and print its reply.
    Call(CallArgs),
    /// Tell an actor (fire and forget).
    Tell(CallArgs),
    /// Dead letters of a running host's outbox: list, replay or purge.
    Dlq {
        /// `list`, `replay` or `purge`.
        op: String,
        /// Only this receiver (`Type/key`).
        #[arg(long)]
        receiver: Option<String>,
        /// Only this message id (replay/purge).
        #[arg(long)]
        id: Option<i64>,
        /// Every dead letter (replay/purge).
        #[arg(long)]
        all: bool,
        /// The host's admin API [default: $SLUICE_HOST, else the config file's context, else
        /// http://127.0.0.1:7401].
        #[arg(long)]
        host: Option<String>,
        /// Bearer token for the admin API.
        #[arg(long, env = "SLUICE_ADMIN_TOKEN")]
        token: Option<String>,
    },
    /// Pending durable reminders of a running host's outbox: list them, or cancel one by name.
    Reminders {
        /// `list` or `cancel`.
        op: String,
        /// Only this actor's (`Type/key`; required to cancel).
        #[arg(long)]
        receiver: Option<String>,
        /// The reminder to cancel.
        #[arg(long)]
        name: Option<String>,
        /// At most this many (list) [default: 100].
        #[arg(long)]
        limit: Option<u32>,
        /// The host's admin API [default: $SLUICE_HOST, else the config file's context, else
        /// http://127.0.0.1:7401].
        #[arg(long)]
        host: Option<String>,
        /// Bearer token for the admin API.
        #[arg(long, env = "SLUICE_ADMIN_TOKEN")]
        token: Option<String>,
    },
    /// Show actor types, activations and queues of a running host.
    Status {
        /// The host's admin API [default: $SLUICE_HOST, else the config file's context, else
        /// http://127.0.0.1:7401].
        #[arg(long)]
        host: Option<String>,
        /// Bearer token for the admin API.
        #[arg(long, env = "SLUICE_ADMIN_TOKEN")]
        token: Option<String>,
    },
    /// Scaffold an actor project in a new folder NAME from the SDK's template: the code, its
    /// build config, a unit test where the template has one, app-config.toml and a README.
    New {
        /// go, python, typescript or rust.
        lang: String,
        /// The folder to create (it may exist if empty).
        name: PathBuf,
    },
    /// Build the Go, Python, TypeScript or Rust actor in DIR into a Sluice component.
    Build {
        /// The actor's folder (language detected from go.mod, *.py, package.json, Cargo.toml).
        dir: PathBuf,
        /// Where to write the component (default DIR/.sluice/actor.wasm).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// TypeScript only: the JavaScript engine to embed. `quickjs` (the default: ~1.6 MB,
        /// fast calls) or `starlingmonkey` (~12 MB, slower calls, web APIs such as `URL` and
        /// `crypto`). Without the flag, `SLUICE_JS_ENGINE` names it.
        #[arg(long, value_name = "ENGINE", value_parser = parse_js_engine)]
        js_engine: Option<sluice_build::JsBackend>,
        /// The same as `--js-engine quickjs` (kept from when StarlingMonkey was the default).
        #[arg(long, hide = true, conflicts_with = "js_engine")]
        qjs: bool,
    },
}

#[derive(clap::Args)]
struct CallArgs {
    /// TYPE/KEY of the actor.
    actor: String,
    /// The message type.
    msg_type: String,
    /// The payload (JSON by convention); empty when omitted.
    payload: Option<String>,
    /// The host's ingress [default: $SLUICE_INGRESS, else the config file's context, else
    /// http://127.0.0.1:7400].
    #[arg(long)]
    host: Option<String>,
    /// The call's deadline in milliseconds.
    #[arg(long)]
    deadline_ms: Option<u64>,
    /// The principal the call is made for (needs a gateway token, or a loopback ingress
    /// without tokens).
    #[arg(long)]
    principal: Option<String>,
    /// Bearer token for the ingress (`[ingress.tokens]` in the app config).
    #[arg(long, env = "SLUICE_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Which checkout this binary was built from. Checkouts of one workspace that share a cargo
    // target dir overwrite one another's `target/debug/sluice`; tests check this before they
    // use a copy (tests/src/lib.rs `sluice_binary`).
    if std::env::var_os("SLUICE_PRINT_BUILD_ROOT").is_some() {
        println!("{}", env!("CARGO_MANIFEST_DIR"));
        return std::process::ExitCode::SUCCESS;
    }
    let cmd = Cli::parse().cmd;
    // Traces are exported only by `run`, and only when an OTLP endpoint is given.
    let endpoint = match &cmd {
        Cmd::Run { otlp_endpoint, .. } => {
            sluice_cli::otlp::Endpoint::resolve(otlp_endpoint.as_deref())
        }
        _ => None,
    };
    let _traces = match sluice_cli::otlp::init(endpoint) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    // A failed command says what failed and exits 1; no stack trace, whatever RUST_BACKTRACE.
    match dispatch(cmd).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn dispatch(cmd: Cmd) -> anyhow::Result<()> {
    match cmd {
        Cmd::Run {
            app_dir,
            listen,
            admin_listen,
            admin_token,
            database_url,
            otlp_endpoint: _,
            cluster,
            node_id,
        } => {
            run(
                app_dir,
                Listeners {
                    listen,
                    admin_listen,
                    admin_token,
                },
                database_url,
                (cluster, node_id),
            )
            .await
        }
        Cmd::Dlq {
            op,
            receiver,
            id,
            all,
            host,
            token,
        } => {
            let body = admin::DlqRequest {
                id,
                receiver: if op == "list" { None } else { receiver.clone() },
                all,
            };
            let host = target::resolve(Api::Admin, host.as_deref())?.url;
            let out = client::dlq(&host, token.as_deref(), &op, receiver.as_deref(), &body).await?;
            println!("{out}");
            Ok(())
        }
        Cmd::Reminders {
            op,
            receiver,
            name,
            limit,
            host,
            token,
        } => {
            let host = target::resolve(Api::Admin, host.as_deref())?.url;
            let op = match op.as_str() {
                "list" => client::RemindersOp::List { receiver, limit },
                "cancel" => match (receiver, name) {
                    (Some(receiver), Some(name)) => {
                        client::RemindersOp::Cancel(admin::CancelReminder { receiver, name })
                    }
                    _ => anyhow::bail!("reminders cancel needs --receiver and --name"),
                },
                other => anyhow::bail!("unknown reminders operation {other:?} (list, cancel)"),
            };
            println!("{}", client::reminders(&host, token.as_deref(), op).await?);
            Ok(())
        }
        Cmd::Deploy {
            app_dir,
            host,
            token,
            force,
        } => {
            let t = target::resolve(Api::Admin, host.as_deref())?;
            println!("sluice: deploying to {} (from {})", t.url, t.source);
            let check = if force {
                client::AppCheck::Force
            } else {
                client::AppCheck::Refuse
            };
            let r = client::deploy(&t.url, &app_dir, token.as_deref(), check, |m| {
                println!("sluice: {m}")
            })
            .await?;
            let types: Vec<String> = r
                .types
                .iter()
                .map(|(ty, v, unchanged)| {
                    format!("{ty} v{v}{}", if *unchanged { " (unchanged)" } else { "" })
                })
                .collect();
            let app = r.host_app.as_deref().unwrap_or("(unnamed)");
            if r.types.iter().all(|(_, _, unchanged)| *unchanged) {
                println!(
                    "deployed nothing new to {} (app {app}): {}",
                    r.host,
                    types.join(", ")
                );
            } else {
                println!("deployed to {} (app {app}): {}", r.host, types.join(", "));
            }
            Ok(())
        }
        Cmd::Call(a) => call("ask", a).await,
        Cmd::Tell(a) => call("tell", a).await,
        Cmd::Status { host, token } => {
            let host = target::resolve(Api::Admin, host.as_deref())?.url;
            println!("{}", client::status(&host, token.as_deref()).await?);
            Ok(())
        }
        Cmd::Build {
            dir,
            output,
            js_engine,
            qjs,
        } => build(dir, output, chosen_js_engine(js_engine, qjs)),
        Cmd::New { lang, name } => {
            let s = sluice_cli::scaffold::new_project(&lang, &name)?;
            println!(
                "sluice: new {lang} actor in {}: {}",
                s.dir.display(),
                s.files.join(", ")
            );
            println!("next:");
            for c in &s.next {
                println!("  {c}");
            }
            Ok(())
        }
    }
}

/// The engine `sluice build` was told to use: `--js-engine`, else QuickJS for the old `--qjs`,
/// else `None` (`SLUICE_JS_ENGINE`, then the default).
fn chosen_js_engine(
    js_engine: Option<sluice_build::JsBackend>,
    qjs: bool,
) -> Option<sluice_build::JsBackend> {
    js_engine.or(qjs.then_some(sluice_build::JsBackend::QuickJs))
}

/// `--js-engine NAME`, read as `sluice_build` reads `SLUICE_JS_ENGINE`.
fn parse_js_engine(name: &str) -> Result<sluice_build::JsBackend, sluice_build::BuildError> {
    name.parse()
}

/// Builds a guest, printing every step as it starts and ends, then the component's path.
fn build(
    dir: PathBuf,
    output: Option<PathBuf>,
    js_engine: Option<sluice_build::JsBackend>,
) -> anyhow::Result<()> {
    use std::sync::Arc;

    use sluice_build::{BuildOptions, Progress};

    let opts = BuildOptions {
        output,
        js_backend: js_engine,
        progress: Some(Arc::new(|p: &Progress| eprintln!("{p}"))),
        repo_root: sluice_cli::scaffold::build_root(&dir),
        ..BuildOptions::default()
    };
    let out = sluice_build::build(&dir, &opts)
        .with_context(|| format!("building the actor in {}", dir.display()))?;
    eprintln!(
        "[{}] built {} ({:.1} MB) in {:.1} s",
        out.language,
        out.component.display(),
        out.size as f64 / 1e6,
        out.elapsed.as_secs_f64()
    );
    println!("{}", out.component.display());
    Ok(())
}

async fn call(verb: &str, a: CallArgs) -> anyhow::Result<()> {
    let payload = a.payload.unwrap_or_default().into_bytes();
    let host = target::resolve(Api::Ingress, a.host.as_deref())?.url;
    let out = client::call(
        &host,
        verb,
        &a.actor,
        &a.msg_type,
        payload,
        &client::CallHeaders {
            deadline_ms: a.deadline_ms,
            principal: a.principal.as_deref(),
            token: a.token.as_deref(),
        },
    )
    .await?;
    let body = String::from_utf8_lossy(&out.body);
    if (200..300).contains(&out.status) {
        println!("{body}");
        Ok(())
    } else {
        // The host's typed JSON error, as it sent it (nothing to print for an empty body).
        if !body.trim().is_empty() {
            eprintln!("{body}");
        }
        bail!("{verb} failed with HTTP {}", out.status)
    }
}

/// Where `sluice run` listens.
struct Listeners {
    listen: SocketAddr,
    admin_listen: SocketAddr,
    admin_token: Option<String>,
}

async fn run(
    app_dir: PathBuf,
    listeners: Listeners,
    database_url: Option<String>,
    (cluster_url, node_id): (Option<String>, Option<String>),
) -> anyhow::Result<()> {
    let Listeners {
        listen,
        admin_listen,
        admin_token,
    } = listeners;
    if !admin_listen.ip().is_loopback() && admin_token.is_none() {
        bail!(
            "the admin API on {admin_listen} is not loopback: set --admin-token (or SLUICE_ADMIN_TOKEN)"
        );
    }
    // Bound before the (possibly long) compile, so a taken port fails at once.
    let ingress_l = bind(listen, "--listen").await?;
    let admin_l = bind(admin_listen, "--admin-listen").await?;
    sluice_cli::metrics_export::handle();
    let database = database_url
        .as_deref()
        .map(|u| u.parse::<sluice_app::DatabaseUrl>())
        .transpose()?;
    let starting = || format!("starting app {}", app_dir.display());
    let app = sluice_app::AppConfig::load(&app_dir)
        .map_err(sluice_app::AppError::from)
        .with_context(starting)?;
    let cluster = sluice_cli::cluster::settings(&app, cluster_url.as_deref(), node_id.as_deref())?;
    if cluster.is_some() {
        sluice_cli::cluster::check_database(database.as_ref())?;
    }
    let mut node: Option<sluice_node::Node> = None;
    let (host, app) = sluice_app::start_prepared(
        &app_dir,
        app,
        database.as_ref(),
        |_| {},
        report_start_step,
        async |host: &sluice_runtime::Host| {
            if let Some(c) = &cluster {
                let n = sluice_node::Node::join(host, c).await.map_err(|e| {
                    sluice_app::AppError::Prepare(format!("joining the cluster at {}: {e}", c.url))
                })?;
                println!("sluice: cluster: joined as node {}", n.node_id());
                node = Some(n);
            }
            Ok(())
        },
    )
    .await
    .with_context(starting)?;
    let node = node.map(std::sync::Arc::new);
    if let Some(n) = &node {
        let children = sluice_cli::cluster::app_children(&app, &app_dir)?;
        n.start_following(&children)
            .await
            .context("cluster: publishing this host's modules")?;
    }
    let app_name = app.app_name(&app_dir);
    println!(
        "sluice: app {app_name:?}: {} actor type(s) from {}",
        app.supervisor.children.len(),
        app_dir.display()
    );
    let ingress_addr = ingress_l.local_addr()?;
    println!("sluice: ingress on http://{ingress_addr}");
    let admin_addr = admin_l.local_addr()?;
    println!("sluice: admin on http://{admin_addr}");
    println!("sluice: console on http://{admin_addr}{}", console::PATH);
    let auth = ingress::IngressAuth::new(&app.ingress, listen.ip().is_loopback());
    if auth.requires_token() {
        println!(
            "sluice: ingress requires a bearer token ({} configured)",
            app.ingress.tokens.len()
        );
    }
    let ingress = ingress::serve(ingress_l, ingress::router_with(host.clone(), auth));
    sluice_cli::metrics_export::export_outbox_config(&host);
    let console = console::Console::start(host.clone(), console::ConsoleConfig::default());
    let admin_router = match &node {
        None => admin::app_router(host.clone(), admin_token, &console, app_name),
        Some(n) => {
            let info: admin::ClusterInfo =
                std::sync::Arc::new(sluice_cli::cluster::Member(n.clone()));
            admin::cluster_router(host.clone(), admin_token, &console, app_name, info)
        }
    };
    let admin = axum::serve(admin_l, admin_router);
    // Both listeners were bound before the app started; connections made since then wait in
    // their backlogs and are served from here on.
    println!("sluice: ready: ingress http://{ingress_addr}, admin http://{admin_addr}");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = ingress => r?,
        r = admin => r?,
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    // Every activation ends after its turn; a member then hands its actors off: their claims
    // go back, it leaves at once, and their next messages activate them on other members.
    host.stop().await;
    if let Some(n) = node {
        n.leave(std::time::Duration::from_secs(5)).await;
        println!("sluice: cluster: left");
    }
    Ok(())
}

/// Binds `addr`; a taken port is named with the flag that chooses another.
async fn bind(addr: SocketAddr, flag: &str) -> anyhow::Result<tokio::net::TcpListener> {
    match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => bail!(
            "port {} is taken ({addr} is in use, perhaps by another `sluice run`): choose another with {flag} (e.g. {flag} {}:0 for any free port)",
            addr.port(),
            addr.ip()
        ),
        Err(e) => Err(anyhow::Error::new(e).context(format!("binding {addr} ({flag})"))),
    }
}

/// Per module while `sluice run` starts: loading, then compiled (done) or cached, with times
/// (stderr). Whether the cache has it is known only once it is loaded, so the first line says
/// neither.
fn report_start_step(step: sluice_app::StartStep<'_>) {
    use sluice_app::StartStep;
    match step {
        StartStep::Compiling { child, bytes } => eprintln!(
            "sluice: [{}] loading {} ({:.1} MB)…",
            child.actor_type,
            child.module.display(),
            bytes as f64 / 1e6
        ),
        StartStep::Deployed { child, deployed } => {
            let ms = deployed.compile_time.as_millis();
            if deployed.cached {
                eprintln!(
                    "sluice: [{}] cached: loaded compiled code in {ms} ms (version {})",
                    child.actor_type, deployed.version
                );
            } else {
                eprintln!(
                    "sluice: [{}] done: compiled in {:.1} s (version {})",
                    child.actor_type,
                    ms as f64 / 1000.0,
                    deployed.version
                );
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use sluice_build::JsBackend;

    use super::{Cli, Cmd, chosen_js_engine};

    fn engine_of(args: &[&str]) -> Result<Option<JsBackend>, clap::Error> {
        let cli = Cli::try_parse_from(["sluice", "build", "dir"].iter().chain(args))?;
        match cli.cmd {
            Cmd::Build { js_engine, qjs, .. } => Ok(chosen_js_engine(js_engine, qjs)),
            _ => unreachable!("parsed a build command"),
        }
    }

    #[test]
    fn js_engine_flag_names_either_engine_and_the_old_qjs_flag_still_means_quickjs() {
        assert_eq!(engine_of(&[]).unwrap(), None);
        assert_eq!(
            engine_of(&["--js-engine", "starlingmonkey"]).unwrap(),
            Some(JsBackend::StarlingMonkey)
        );
        assert_eq!(
            engine_of(&["--js-engine", "quickjs"]).unwrap(),
            Some(JsBackend::QuickJs)
        );
        assert_eq!(engine_of(&["--qjs"]).unwrap(), Some(JsBackend::QuickJs));
        assert!(engine_of(&["--js-engine", "v8"]).is_err());
        assert!(engine_of(&["--qjs", "--js-engine", "starlingmonkey"]).is_err());
    }
}
