//! The JavaScript runtime: QuickJS (rquickjs) in a worker process, the broker's own binary in
//! its `__js` mode, run inside the same jail as Python. QuickJS has no file, network or process
//! API of its own, so a program reaches nothing but the SDK; the runtime's memory limit and an
//! interrupt at the deadline bound it from inside as well.

use std::cell::{Cell, RefCell};
use std::io::{BufRead, BufReader, Write};
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant};

use rquickjs::promise::PromiseState;
use rquickjs::{Context, Ctx, Function, Module, Runtime, Value};

/// The argument that selects the worker mode of the broker's binary.
pub const WORKER_ARG: &str = "__js";
pub const PRELUDE: &str = include_str!("js/prelude.js");

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn show<'js>(ctx: &Ctx<'js>, v: Value<'js>) -> String {
    if let Some(e) = v.as_exception() {
        let mut s = format!("{}: {}", "Error", e.message().unwrap_or_default());
        if let Ok(name) = e.get::<_, String>("name") {
            s = format!("{name}: {}", e.message().unwrap_or_default());
        }
        if let Some(stack) = e.stack().filter(|s| !s.is_empty()) {
            s.push('\n');
            s.push_str(stack.trim_end());
        }
        return s;
    }
    ctx.json_stringify(v)
        .ok()
        .flatten()
        .and_then(|s| s.to_string().ok())
        .unwrap_or_else(|| "(a value that is not JSON)".into())
}

/// The runtime as the jail runs it in process (`argv` is only its label): it waits for its
/// job on the SDK channel, so that a run can take over a jail whose runtime is already up.
pub fn run_in_jail(_argv: &[String]) -> i32 {
    let code = match run() {
        Ok(c) => i32::from(c != ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("{e}");
            1
        }
    };
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    code
}

/// The same runtime as a process of its own (`__js`), its job on the SDK channel as well.
pub fn worker_main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let channel = mcpb_sandbox::sdk_channel().ok_or("the SDK channel (fd 3) is not open")?;
    let writer = Rc::new(RefCell::new(
        channel.try_clone().map_err(|e| e.to_string())?,
    ));
    let mut reader = BufReader::new(channel);
    let rt = Runtime::new().map_err(|e| e.to_string())?;
    rt.set_memory_limit(
        usize::try_from(env_u64("MCP_JS_MEMORY_BYTES", 256 << 20)).unwrap_or(usize::MAX),
    );
    rt.set_max_stack_size(1 << 20);
    // The wall clock starts with the job, not with the runtime, which is up before its run.
    let deadline = std::sync::Arc::new(std::sync::OnceLock::<Instant>::new());
    let ends = deadline.clone();
    rt.set_interrupt_handler(Some(Box::new(move || {
        ends.get().is_some_and(|t| Instant::now() > *t)
    })));
    let ctx = Context::full(&rt).map_err(|e| e.to_string())?;
    ctx.with(|ctx| -> Result<ExitCode, String> {
        install_host(&ctx, writer)?;
        let g = ctx.globals();
        let deliver: Function = g.get("__deliver").map_err(|e| e.to_string())?;
        let waiting: Function = g.get("__waiting").map_err(|e| e.to_string())?;
        let closed: Function = g.get("__closed").map_err(|e| e.to_string())?;
        let uncaught = |ctx: &Ctx<'_>| {
            eprintln!("Uncaught {}", show(ctx, ctx.catch()));
            Ok(ExitCode::from(1))
        };
        let Some(job) = crate::job::Job::read(&mut reader)? else {
            // The broker let this runtime go without a run.
            return Ok(ExitCode::SUCCESS);
        };
        let _ = deadline
            .set(Instant::now() + Duration::from_millis(env_u64("MCP_JS_DEADLINE_MS", 30_000)));
        let code = job.source()?;
        let promise = match Module::evaluate(ctx.clone(), "main.js", code) {
            Ok(p) => p,
            Err(_) => return uncaught(&ctx),
        };
        let mut line = String::new();
        loop {
            while ctx.execute_pending_job() {}
            let n: u64 = waiting.call(()).unwrap_or(0);
            if n == 0 {
                break;
            }
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    let _ = closed.call::<_, ()>(("the broker channel closed",));
                }
                Ok(_) => deliver_line(&deliver, &line),
            }
        }
        match promise.state() {
            PromiseState::Resolved => Ok(ExitCode::SUCCESS),
            PromiseState::Rejected => {
                let _ = promise.result::<Value>();
                uncaught(&ctx)
            }
            PromiseState::Pending => {
                eprintln!("the program awaits a promise that nothing will resolve");
                Ok(ExitCode::from(1))
            }
        }
    })
}

/// The host functions the prelude builds on (`__send` writes a request on the SDK channel,
/// `__print` writes to stdout or stderr), then the prelude itself.
fn install_host(ctx: &Ctx<'_>, writer: Rc<RefCell<std::fs::File>>) -> Result<(), String> {
    let next = Rc::new(Cell::new(0u64));
    let send = Function::new(ctx.clone(), move |method: String, params: String| -> u64 {
        next.set(next.get() + 1);
        let id = next.get();
        let method = serde_json::Value::String(method);
        let line = format!("{{\"id\":{id},\"method\":{method},\"params\":{params}}}\n");
        // A failed write shows as the channel closing when the answer is read.
        let _ = writer.borrow_mut().write_all(line.as_bytes());
        id
    })
    .map_err(|e| e.to_string())?;
    let print = Function::new(ctx.clone(), |fd: i32, text: String| {
        if fd == 2 {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    })
    .map_err(|e| e.to_string())?;
    let g = ctx.globals();
    g.set("__send", send).map_err(|e| e.to_string())?;
    g.set("__print", print).map_err(|e| e.to_string())?;
    ctx.eval::<(), _>(PRELUDE).map_err(|e| e.to_string())
}

/// Hands one line from the broker to the prelude: an answer by its id, a notice without one;
/// a line that is not JSON is dropped.
fn deliver_line(deliver: &Function<'_>, line: &str) {
    let id = serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .map(|v| v.get("id").and_then(serde_json::Value::as_u64));
    let text = line.trim_end().to_string();
    match id {
        Some(Some(id)) => {
            let _ = deliver.call::<_, ()>((id, text));
        }
        Some(None) => {
            let _ = deliver.call::<_, ()>((rquickjs::Null, text));
        }
        None => {}
    }
}

/// argv of a JavaScript run: the runtime built into this binary, run in process inside the
/// jail; the snippet or the workspace file comes as the job.
pub fn program() -> Vec<String> {
    vec!["javascript".into()]
}
