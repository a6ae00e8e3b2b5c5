//! The console's HTTP side: one loopback listener, the access checks before anything else, the
//! routes, and the CLI runs behind approvals and measurements.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use parking_lot::Mutex;
use tokio::sync::{broadcast, watch};

use crate::access::{Access, CSRF_FIELD, Denied};
use crate::backend::{Backend, Outcome, UpstreamAction};
use crate::error::ConsoleError;
use crate::pages::{self, activity, context, tools};

type Reply = Response<BoxBody<Bytes, Infallible>>;

/// How long a request's head may take to arrive.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest form accepted (an action carries a name and a token).
const MAX_FORM: usize = 64 * 1024;
/// How long a CLI run behind an action may take (a measurement starts upstreams).
const CLI_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the live stream sends a comment, so the connection is seen to be alive.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// Connections that showed the key or a session's path, served at once. A person's browser
/// needs a handful; each connection costs the daemon a descriptor and buffers.
const MAX_CONNECTIONS: usize = 64;
/// Connections that have not shown one yet: anyone on the machine can open them, and they
/// wait apart (the oldest makes room for the newest, none waits past a short deadline), so
/// idle connections can never lock the person with the key out.
const MAX_WAITING: usize = 64;
/// The most a request's head may buffer (hyper's floor is 8 KiB).
const MAX_HEAD: usize = 16 * 1024;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

static CSS: &str = include_str!("../assets/console.css");
static JS: &str = include_str!("../assets/console.js");
static ICON: &str = include_str!("../assets/favicon.svg");

struct Console<B> {
    backend: Arc<B>,
    access: Access,
    /// The last action's outcome, shown once on its page.
    flash: Mutex<Option<(String, Outcome)>>,
    measured: Mutex<context::Measured>,
    shutdown: watch::Receiver<bool>,
    pools: crate::pool::Pools,
}

/// A console listening: the address to open (it carries the key), the address it is bound
/// to, and the task serving it.
pub struct Started<F> {
    pub url: String,
    pub bound: SocketAddr,
    pub serve: F,
}

/// Binds `listen` (loopback only) now and returns the URL and the future that serves it until
/// `shutdown` is set.
pub fn start<B: Backend>(
    listen: &str,
    backend: Arc<B>,
    shutdown: watch::Receiver<bool>,
) -> Result<Started<impl Future<Output = ()> + Send + 'static>, ConsoleError> {
    let addr: SocketAddr = listen
        .parse()
        .map_err(|_| ConsoleError::NotLoopback(listen.to_string()))?;
    let ours = [
        std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
    ];
    if !ours.contains(&addr.ip()) {
        return Err(ConsoleError::NotLoopback(listen.to_string()));
    }
    let bind = |source| ConsoleError::Bind {
        listen: listen.to_string(),
        source,
    };
    let std_listener = std::net::TcpListener::bind(addr).map_err(bind)?;
    std_listener.set_nonblocking(true).map_err(bind)?;
    let bound = std_listener.local_addr().map_err(bind)?;
    let listener = tokio::net::TcpListener::from_std(std_listener).map_err(bind)?;
    let access = Access::new(bound);
    let url = access.login_url();
    let console = Arc::new(Console {
        backend,
        access,
        flash: Mutex::default(),
        measured: Mutex::default(),
        shutdown,
        pools: crate::pool::Pools::new(MAX_CONNECTIONS, MAX_WAITING),
    });
    Ok(Started {
        url,
        bound,
        serve: serve(console, listener),
    })
}

async fn serve<B: Backend>(console: Arc<Console<B>>, listener: tokio::net::TcpListener) {
    let mut shutdown = console.shutdown.clone();
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "console accept failed; pausing accepts for 100 ms");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = stopped(&mut shutdown) => break,
        };
        let conn = console.pools.arrive();
        let console = console.clone();
        let mut stop = console.shutdown.clone();
        tokio::spawn(async move {
            let service = {
                let console = console.clone();
                let conn = conn.clone();
                hyper::service::service_fn(move |req| {
                    let console = console.clone();
                    let conn = conn.clone();
                    async move { Ok::<_, Infallible>(guarded(&console, &conn, req).await) }
                })
            };
            let serving = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .max_buf_size(MAX_HEAD)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::pin!(serving);
            // Until a request shows the key or a session's path the connection has a short
            // deadline and may be evicted for a newer one. A stopped console (the daemon stops,
            // or a reload turned it off) keeps no connection open: its key is worth nothing
            // from then on.
            let deadline = tokio::time::sleep(crate::pool::WAITING_DEADLINE);
            tokio::pin!(deadline);
            loop {
                if conn.evicted() {
                    break;
                }
                tokio::select! {
                    _ = &mut serving => break,
                    () = stopped(&mut stop) => break,
                    () = conn.changed(), if !conn.admitted() => {}
                    () = &mut deadline, if !conn.admitted() => break,
                }
                if conn.admitted() {
                    tokio::select! {
                        _ = &mut serving => {}
                        () = stopped(&mut stop) => {}
                    }
                    break;
                }
            }
            console.pools.leave(&conn);
        });
    }
}

/// Until the daemon stops (or its stop signal is gone).
async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Reply {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    let h = r.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        // Not no-referrer: under it a browser sends `Origin: null` with our own forms.
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(name, v);
        }
    }
    r
}

fn html(body: String) -> Reply {
    reply(StatusCode::OK, "text/html; charset=utf-8", body)
}

fn see_other(to: &str) -> Reply {
    let mut r = reply(StatusCode::SEE_OTHER, "text/plain; charset=utf-8", "");
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

fn refused(status: StatusCode, what: &str, hint: &str) -> Reply {
    reply(
        status,
        "text/html; charset=utf-8",
        pages::refusal(what, hint),
    )
}

fn header_of<'a>(req: &'a Request<Incoming>, name: &header::HeaderName) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// The value of `key` in a query string or form, or "".
fn param(query: &str, key: &str) -> String {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// Moves the connection to the main pool once a request has shown the key or a session's path;
/// a refusal when the main pool is full.
fn admitted<B: Backend>(console: &Console<B>, conn: &crate::pool::Conn) -> Option<Reply> {
    (!console.pools.admit(conn)).then(|| {
        refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "the console serves as many connections as it may",
            "close other console tabs, or try again in a moment",
        )
    })
}

/// The access checks, then the route.
async fn guarded<B: Backend>(
    console: &Arc<Console<B>>,
    conn: &crate::pool::Conn,
    req: Request<Incoming>,
) -> Reply {
    if let Some(refusal) = unclear_headers(&req).or_else(|| misplaced(console, &req)) {
        return refusal;
    }
    let login = req.uri().path() == "/login";
    let query = req.uri().query().unwrap_or("").to_string();
    if login && req.method() == Method::GET {
        return log_in(console, conn, &query);
    }
    // Browsers ask for an icon whatever the page says; a 404 would be a console error.
    if req.uri().path() == "/favicon.ico" {
        return reply(StatusCode::OK, "image/svg+xml", ICON);
    }
    let Some(page) = console.access.page(req.uri().path()).map(str::to_string) else {
        return refused(
            StatusCode::UNAUTHORIZED,
            "the console needs its key",
            "run `mcp-broker console` and open the link it prints",
        );
    };
    if let Some(full) = admitted(console, conn) {
        return full;
    }
    if req.method() == Method::POST {
        return post(console, page, req).await;
    }
    if req.method() != Method::GET {
        return refused(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("{} is not served here", req.method()),
            "use the pages' links and buttons",
        );
    }
    show(console, &page, &query).await
}

/// A refusal for a checked header sent twice, or not readable as text: it is refused rather
/// than half-read.
fn unclear_headers(req: &Request<Incoming>) -> Option<Reply> {
    for name in [
        header::HOST,
        header::ORIGIN,
        header::HeaderName::from_static("sec-fetch-site"),
    ] {
        let values: Vec<_> = req.headers().get_all(&name).iter().collect();
        if values.len() > 1 || values.iter().any(|v| v.to_str().is_err()) {
            return Some(refused(
                StatusCode::BAD_REQUEST,
                &format!("the {name} header is sent more than once or is not text"),
                "send it once",
            ));
        }
    }
    None
}

/// A refusal for a request sent to another host than the console's, or an action from
/// another site.
fn misplaced<B: Backend>(console: &Console<B>, req: &Request<Incoming>) -> Option<Reply> {
    let site = header::HeaderName::from_static("sec-fetch-site");
    let host = header_of(req, &header::HOST);
    // A request in absolute form names its host in the target too: both must be ours.
    let target = req.uri().authority().map(|a| a.as_str());
    // Only actions are refused for coming from another site. A page is opened from anywhere
    // (a terminal, the forwarding page `console` writes, which a browser counts as another
    // site, and every redirect after it); reading one needs the key or the session's path,
    // and another site's script cannot read what it answers.
    let fetch_site = if req.method() == Method::GET {
        None
    } else {
        header_of(req, &site)
    };
    let placed = console
        .access
        .place(host, header_of(req, &header::ORIGIN), fetch_site)
        .and_then(|()| match target {
            Some(t) if Some(t) != host => Err(Denied::Forbidden(format!(
                "the request names {t:?} but is sent to {host:?}"
            ))),
            _ => Ok(()),
        });
    if let Err(Denied::Forbidden(why)) = placed {
        return Some(refused(
            StatusCode::FORBIDDEN,
            &why,
            "open the console from the address `mcp-broker console` prints",
        ));
    }
    None
}

/// `GET /login?key=...`: with this console's key, on to the servers page.
fn log_in<B: Backend>(console: &Console<B>, conn: &crate::pool::Conn, query: &str) -> Reply {
    if !console.access.key_ok(&param(query, "key")) {
        return refused(
            StatusCode::UNAUTHORIZED,
            "this link's key is not this console's",
            "run `mcp-broker console` for the current link (each console start has its own)",
        );
    }
    if let Some(full) = admitted(console, conn) {
        return full;
    }
    see_other(&format!("{}servers", console.access.home()))
}

/// An action posted from `path`'s form, its token checked.
async fn post<B: Backend>(
    console: &Arc<Console<B>>,
    path: String,
    req: Request<Incoming>,
) -> Reply {
    let form = match read_form(req).await {
        Ok(f) => f,
        Err(r) => return r,
    };
    if !console
        .access
        .csrf_ok(Some(param(&form, CSRF_FIELD).as_str()))
    {
        return refused(
            StatusCode::FORBIDDEN,
            "the action carries no valid form token",
            "reload the page and try again",
        );
    }
    // Carried out apart from the request: a browser that goes away does not cut an
    // action off half-way (a restart stopped and never started).
    let (console, form) = (console.clone(), form.clone());
    tokio::spawn(async move { act(&console, &path, &form).await })
        .await
        .unwrap_or_else(|_| {
            refused(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the action failed inside the daemon",
                "`mcp-broker logs` shows why",
            )
        })
}

async fn read_form(req: Request<Incoming>) -> Result<String, Reply> {
    let body = Limited::new(req.into_body(), MAX_FORM)
        .collect()
        .await
        .map_err(|_| {
            refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the form is too large or was cut short",
                "an action carries a name and a token",
            )
        })?
        .to_bytes();
    String::from_utf8(body.to_vec()).map_err(|_| {
        refused(
            StatusCode::BAD_REQUEST,
            "the form is not text",
            "send it as application/x-www-form-urlencoded",
        )
    })
}

/// The flash for `page`, taken so it shows once.
fn flash<B>(console: &Console<B>, page: &str) -> Option<Outcome> {
    let mut slot = console.flash.lock();
    if slot.as_ref().is_some_and(|(p, _)| *p == page) {
        slot.take().map(|(_, o)| o)
    } else {
        None
    }
}

async fn show<B: Backend>(console: &Arc<Console<B>>, path: &str, query: &str) -> Reply {
    let b = &console.backend;
    let csrf = console.access.csrf();
    let body = match path {
        "/" => return see_other("servers"),
        "/assets/console.css" => return reply(StatusCode::OK, "text/css; charset=utf-8", CSS),
        "/assets/console.js" => {
            return reply(StatusCode::OK, "text/javascript; charset=utf-8", JS);
        }
        "/assets/favicon.svg" => {
            return reply(StatusCode::OK, "image/svg+xml", ICON);
        }
        "/activity/live" => return live(b.live(), console.shutdown.clone()),
        "/servers" => pages::servers::render(&b.status(), csrf),
        "/tools" | "/tool" => {
            let profiles = b.profiles();
            let mut profile = param(query, "profile");
            if profile.is_empty() {
                profile = default_profile(&profiles);
            }
            if path == "/tool" {
                let name = param(query, "name");
                let def = b.tool(&profile, &name).await;
                tools::render_one(&profile, &name, def.as_ref())
            } else {
                let q = param(query, "q");
                let found = b.tools(&profile, &q).await;
                tools::render(&profiles, &profile, &q, &found)
            }
        }
        "/trust" => pages::trust::render(&pins(console).await, csrf),
        "/activity" => {
            let filter = activity::Filter::from_query(query);
            let rows = match b.audit_log() {
                Some(p) => {
                    let f = filter.clone();
                    tokio::task::spawn_blocking(move || activity::read(&p, &f))
                        .await
                        .map_err(|e| e.to_string())
                        .and_then(|r| match r {
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                            r => r.map_err(|e| format!("cannot read the audit log: {e}")),
                        })
                }
                None => Ok(Vec::new()),
            };
            activity::render(&filter, &rows, b.audit_log().is_some())
        }
        "/context" => {
            let measured = console.measured.lock().clone();
            context::render(&b.profiles(), &measured, csrf)
        }
        "/charts" => pages::charts::render(&b.series()),
        _ => {
            return refused(
                StatusCode::NOT_FOUND,
                &format!("no page at {path}"),
                "the pages are Servers, Tools, Trust, Activity, Context and Charts",
            );
        }
    };
    // A tool's own page belongs to Tools in the navigation.
    let page = if path == "/tool" { "/tools" } else { path };
    html(pages::page(page, flash(console, page).as_ref(), body))
}

/// The default profile when there is one, else the first.
fn default_profile(profiles: &[(String, Vec<String>)]) -> String {
    profiles
        .iter()
        .find(|(p, _)| p == "default")
        .or_else(|| profiles.first())
        .map(|(p, _)| p.clone())
        .unwrap_or_default()
}

/// Carries out one action and sends the browser back to its page, which shows the outcome.
async fn act<B: Backend>(console: &Arc<Console<B>>, path: &str, form: &str) -> Reply {
    let b = &console.backend;
    let (page, outcome): (&'static str, Outcome) = match path {
        "/servers" => {
            let name = param(form, "upstream");
            let outcome = match UpstreamAction::parse(&param(form, "action")) {
                Some(a) => b.upstream(&name, a).await,
                None => Outcome {
                    ok: false,
                    text: "unknown action; it is start, stop or restart".into(),
                },
            };
            ("/servers", outcome)
        }
        "/trust" => {
            let tool = param(form, "tool");
            // The page showed the findings beside the button: the click is the person's yes.
            let outcome = match param(form, "verdict").as_str() {
                "approve" => {
                    let hash = param(form, "hash");
                    let args = [
                        "pins",
                        "approve",
                        "--yes",
                        "--by",
                        "console",
                        "--expect-hash",
                        &hash,
                        "--",
                        &tool,
                    ];
                    run(b.cli(), &args).await
                }
                "reject" => {
                    let args = ["pins", "reject", "--by", "console", "--", &tool];
                    run(b.cli(), &args).await
                }
                _ => Outcome {
                    ok: false,
                    text: "unknown verdict; it is approve or reject".into(),
                },
            };
            ("/trust", outcome)
        }
        "/context" => {
            let profile = param(form, "profile");
            if !b.profiles().iter().any(|(p, _)| *p == profile) {
                return refused(
                    StatusCode::NOT_FOUND,
                    &format!("no profile named {profile:?}"),
                    "use the buttons on the Context page",
                );
            }
            let args = ["measure", "--json", "--profile", &profile];
            let outcome = run(b.cli(), &args).await;
            let result = if outcome.ok {
                serde_json::from_str(&outcome.text).map_err(|e| format!("unreadable: {e}"))
            } else {
                Err(outcome.text.clone())
            };
            let ok = result.is_ok();
            console.measured.lock().insert(profile.clone(), result);
            let text = if ok {
                format!("measured profile {profile}")
            } else {
                format!("measuring profile {profile} failed")
            };
            ("/context", Outcome { ok, text })
        }
        _ => {
            return refused(
                StatusCode::NOT_FOUND,
                &format!("no action at {path}"),
                "use the pages' buttons",
            );
        }
    };
    *console.flash.lock() = Some((page.to_string(), outcome));
    see_other(page.trim_start_matches('/'))
}

/// What `pins list --json` prints.
async fn pins<B: Backend>(console: &Console<B>) -> Result<serde_json::Value, String> {
    let outcome = run(console.backend.cli(), &["pins", "list", "--json"]).await;
    if !outcome.ok {
        return Err(outcome.text);
    }
    serde_json::from_str(&outcome.text).map_err(|e| format!("`pins list --json` said: {e}"))
}

/// Runs the CLI; the outcome's text is its stdout when it worked, else both streams.
async fn run(mut cmd: tokio::process::Command, args: &[&str]) -> Outcome {
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let said = match tokio::time::timeout(CLI_TIMEOUT, cmd.output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => {
            return Outcome {
                ok: false,
                text: format!("cannot run mcp-broker: {e}"),
            };
        }
        Err(_) => {
            return Outcome {
                ok: false,
                text: format!(
                    "mcp-broker {} took over {} s and was stopped",
                    args.join(" "),
                    CLI_TIMEOUT.as_secs()
                ),
            };
        }
    };
    let stdout = String::from_utf8_lossy(&said.stdout);
    let stderr = String::from_utf8_lossy(&said.stderr);
    let ok = said.status.success();
    Outcome {
        ok,
        text: if ok && args.contains(&"--json") {
            stdout.into_owned()
        } else {
            format!("{stdout}{stderr}").trim_end().to_string()
        },
    }
}

/// The calls as they are made, as server-sent events, until the browser leaves or the daemon
/// stops. A browser that falls behind is told how many it missed.
fn live(rx: broadcast::Receiver<Arc<str>>, shutdown: watch::Receiver<bool>) -> Reply {
    let events = futures_util::stream::unfold((rx, shutdown), |(mut rx, mut stop)| async move {
        let frame = tokio::select! {
            got = rx.recv() => match got {
                Ok(line) => format!("data: {line}\n\n"),
                Err(broadcast::error::RecvError::Lagged(n)) => format!(": {n} calls not shown\n\n"),
                Err(broadcast::error::RecvError::Closed) => return None,
            },
            () = tokio::time::sleep(KEEPALIVE) => ": keepalive\n\n".to_string(),
            () = stopped(&mut stop) => return None,
        };
        Some((
            Ok::<_, Infallible>(Frame::data(Bytes::from(frame))),
            (rx, stop),
        ))
    });
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(events)));
    for (name, value) in [
        (header::CONTENT_TYPE, "text/event-stream"),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ] {
        r.headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    r
}
