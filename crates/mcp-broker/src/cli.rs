//! Command-line interface.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "mcp-broker",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("MCPB_COMMIT"), ")"),
    about = "One local daemon in front of all your MCP servers"
)]
pub(crate) struct Cli {
    /// Config file (default: $MCP_BROKER_CONFIG, then $MCP_BROKER_HOME/broker.yaml, then the
    /// embedded default).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Colours in what is written to a terminal (the daemon's log when it runs in one):
    /// `auto` uses them at a terminal unless NO_COLOR is set.
    #[arg(long, global = true, value_enum, default_value_t = clap::ColorChoice::Auto)]
    pub color: clap::ColorChoice,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Relay an MCP client's stdio to the daemon (starting it if needed). This is the one entry
    /// a client config needs.
    Stdio(StdioArgs),
    /// Run the daemon in the foreground.
    Daemon,
    /// Start the daemon in the background; returns when it answers.
    Start,
    /// Stop the daemon (in-flight calls get the grace period) and every upstream it runs.
    Stop,
    /// Stop the daemon if it runs, then start it from this shell: with this environment (new
    /// `export`s) and this config file.
    Restart,
    /// Re-read the config: changed upstreams restart, unchanged ones keep running; an invalid
    /// file is refused whole and the daemon keeps the old one (SIGHUP does the same).
    Reload,
    /// Show the daemon and its upstreams. Never starts anything.
    Status {
        /// Print the status as JSON (the same data, for scripts).
        #[arg(long)]
        json: bool,
    },
    /// A live view of the daemon: sessions, calls in flight, and per upstream its state,
    /// processes, calls per second, errors and latency percentiles. Ctrl-C ends it.
    Top {
        /// Time between redraws ("500ms", "2s").
        #[arg(long, default_value = "1s")]
        interval: humantime::Duration,
        /// Draw this many frames, then exit (for scripts).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        count: Option<u64>,
    },
    /// Kill upstream processes left behind by a daemon that died (it does this itself on start).
    Reap,
    /// Try the broker end to end on the embedded default config, in a temporary runtime dir.
    Demo,
    /// Configuration commands.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Run the built-in example MCP server on stdio.
    ExampleServer,
    /// What a profile puts into a model's context: tool definitions, bytes and o200k_base
    /// tokens of its upstreams' raw tools against what the profile exposes.
    Measure(MeasureArgs),
    /// Search, describe and call tools through a profile, as a model would with the facade.
    Tools(ToolsArgs),
    /// Run a program in the code sandbox through a profile, as a model would with run_code.
    Exec(ExecArgs),
    /// Approved tool definitions, quarantined changes and description findings.
    Pins {
        #[command(subcommand)]
        command: PinsCommand,
    },
    /// The broker's entry in an AI client's own config file: a dry run (a diff), applying it
    /// (after a backup, only what the dry run showed), rolling back, or each client's state.
    Client {
        #[command(subcommand)]
        command: ClientCommand,
    },
    /// Add an upstream to the config (comments and order kept; validated before it is written;
    /// a running daemon reloads): `add git -- uvx mcp-server-git`, `add notes --url URL`.
    Add(AddArgs),
    /// Remove an upstream from the config (only its own lines go).
    Remove {
        /// The upstream's name.
        name: String,
    },
    /// The configured upstreams: transport, lifecycle, state and tool count.
    List {
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// A shell completion script: `mcp-broker completions bash > ~/.local/share/bash-completion/completions/mcp-broker`.
    Completions {
        /// The shell to write it for.
        shell: clap_complete::Shell,
    },
    /// The daemon as a user service (systemd, or launchd on macOS): a dry run unless --apply.
    Service {
        #[command(subcommand)]
        command: ServiceCommand,
        /// The service manager (default: systemd; launchd on macOS).
        #[arg(long, global = true, value_parser = ["systemd", "launchd"])]
        manager: Option<String>,
    },
    /// Put every client file the broker changed back (every scope and project), stop and
    /// remove the service, stop the daemon; the config and the rest stay unless --purge. A dry
    /// run unless --apply.
    Uninstall(UninstallArgs),
    /// Check this machine: binary, config and what it needs at run time, runtime dir, daemon,
    /// leftover processes, client entries; each problem with the command that fixes it.
    Doctor {
        /// Print the checks as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The sandbox of stdio servers: `check NAME` starts one under its policy, lists its tools
    /// and shows what it was denied.
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// Profiles: `validate P` runs each upstream's smoke probe through P's view; `acceptance P`
    /// prints the same probes as calls to paste into a live client session.
    Profile {
        #[command(subcommand)]
        command: ProfileCommand,
    },
    /// Whether two profiles discover the same tools (compared by upstream and tool, whatever
    /// their name styles or facade), and the top results of each upstream's smoke query in
    /// both; exits 1 when they differ. Starts upstreams whose tool lists are unknown.
    Parity(ParityArgs),
    /// The daemon's state in the Prometheus text format (sessions, calls in flight, each
    /// upstream's state, starts, failures, tools, processes); starts nothing.
    Metrics,
    /// The daemon's log, or one upstream's lines of it (its stderr, its starts and failures).
    Logs(LogsArgs),
    /// OAuth sign-in to remote upstreams that ask for one.
    Auth {
        #[command(subcommand)]
        command: AuthCommand,
    },
    /// The daemon's web console (servers, tools, approvals, calls, context costs): starts it,
    /// prints its address, which carries its key, and opens a browser when there is one.
    Console {
        /// Print the address only.
        #[arg(long)]
        no_open: bool,
    },
    /// Start, stop or restart one upstream's processes in the running daemon.
    Upstream {
        #[command(subcommand)]
        command: UpstreamCommand,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum UpstreamCommand {
    /// Start it now (a shared upstream) and list its tools.
    Start { name: String },
    /// Stop its processes; it starts again on its next call.
    Stop { name: String },
    /// Stop it, then start it again.
    Restart { name: String },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ClientCommand {
    /// Show, as a unified diff, the entry `apply` would write; nothing is written.
    Render {
        #[command(flatten)]
        target: ClientTarget,
    },
    /// Write what the last `render` showed (refused if the file changed since), after a backup.
    Apply {
        #[command(flatten)]
        target: ClientTarget,
    },
    /// Put a client's file back as it was before the newest (or a named) backup, if it is
    /// still what the broker wrote.
    Rollback {
        #[command(flatten)]
        target: ClientTarget,
        /// The backup's name (default: the newest).
        #[arg(long)]
        backup: Option<String>,
        /// Put it back even though the file changed since the broker wrote it.
        #[arg(long)]
        force: bool,
    },
    /// Move a client's own servers into the broker, from every scope it keeps them in (Claude
    /// Code: user, local, project): they become upstreams behind a profile made for the client,
    /// literal secrets become files under secrets/, and the client's user file keeps only the
    /// broker's entry. A dry run (diffs and a table of what moves and what stays) unless
    /// --apply; after --apply, the client's tools are compared before and after.
    Import(ImportArgs),
    /// Whether the client reaches through the broker every tool its own servers had: starts the
    /// servers of the newest import's backups as the client did and compares their tools with
    /// what the client's profile shows now.
    Parity {
        /// The client.
        #[arg(long, value_parser = ["claude-desktop", "claude-code", "codex", "gemini", "cursor", "vscode", "agy"])]
        client: String,
        /// Print the comparison as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Codex's hosted apps (its `codex_apps` connectors, cached under
    /// $CODEX_HOME/cache/codex_apps_tools): each app and how many of its tools the model is
    /// shown. With --allow, Codex's config.toml gets `[apps]` tables that show only those apps
    /// (or single tools, APP/TOOL): a dry run (a diff and the counts) unless --apply, which
    /// writes it after a backup (`client rollback --client codex` takes it back).
    CodexApps {
        /// Apps to keep (an id or a name from the list, or APP/TOOL); comma-separated or
        /// repeated.
        #[arg(long, value_delimiter = ',')]
        allow: Vec<String>,
        /// Write the change (after a backup).
        #[arg(long)]
        apply: bool,
    },
    /// For each client (or one): its file, and whether the broker's entry is there.
    Status {
        /// Only this client.
        #[arg(long, value_parser = ["claude-desktop", "claude-code", "codex", "gemini", "cursor", "vscode", "agy"])]
        client: Option<String>,
        /// The project's files (in this directory) instead of the user's.
        #[arg(long)]
        project: bool,
        /// Print the states as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, clap::Args)]
pub(crate) struct ImportArgs {
    /// The client.
    #[arg(long, value_parser = ["claude-desktop", "claude-code", "codex", "gemini", "cursor", "vscode", "agy"])]
    pub client: String,
    /// The profile the client's entry names (default: the client's own from `clients:`, else
    /// one named after the client, made with exactly the servers it had).
    #[arg(long)]
    pub profile: Option<String>,
    /// Only these scopes (user, local, project; repeatable). Default: every scope the client
    /// has for this folder.
    #[arg(long, value_parser = ["user", "local", "project"])]
    pub scope: Vec<String>,
    /// Same as --scope project.
    #[arg(long, hide = true)]
    pub project: bool,
    /// Move this folder's project servers of a client whose trust the broker cannot read
    /// (VS Code, Cursor, Antigravity): without it (or --scope project) they stay.
    #[arg(long)]
    pub trust_project: bool,
    /// Claude Code: the local servers of every folder in ~/.claude.json, not only this one's.
    #[arg(long)]
    pub all_projects: bool,
    /// Leave this server in the client (repeatable).
    #[arg(long, value_name = "SERVER")]
    pub keep: Vec<String>,
    /// Move server OLD as upstream NEW (repeatable).
    #[arg(long, value_name = "OLD=NEW")]
    pub rename: Vec<String>,
    #[command(flatten)]
    pub view: ViewArgs,
    /// A new profile hides the mutating tools the servers have (the client had them).
    #[arg(long)]
    pub read_only: bool,
    /// The moved servers run unsandboxed (they get the standard sandbox otherwise).
    #[arg(long)]
    pub no_sandbox: bool,
    /// Take moved servers out of project files that git tracks too (shared with whoever uses
    /// the repository); without it they stay there, or, for Claude Code, are switched off for
    /// you alone in ~/.claude.json.
    #[arg(long)]
    pub edit_project_files: bool,
    /// Write what the last dry run showed (after a backup of each client file).
    #[arg(long)]
    pub apply: bool,
}

/// What a profile shows: the flags of `profile set` and `client import`.
#[derive(Debug, clap::Args)]
pub(crate) struct ViewArgs {
    /// The compact broker_* facade (and pinned tools) only.
    #[arg(long, conflicts_with_all = ["raw", "budget"])]
    pub compact: bool,
    /// Every tool raw, whatever it costs.
    #[arg(long, conflicts_with = "budget")]
    pub raw: bool,
    /// Tool definitions within this many (o200k) tokens: raw when they fit, else the facade and
    /// the tools the client calls most (`client import` gives new profiles 1000).
    #[arg(long, value_name = "TOKENS")]
    pub budget: Option<u32>,
}

impl ViewArgs {
    pub(crate) fn ask(&self) -> Option<ViewAsk> {
        ViewAsk::from_flags(self.raw, self.compact, self.budget)
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct ClientTarget {
    /// The client.
    #[arg(long, value_parser = ["claude-desktop", "claude-code", "codex", "gemini", "cursor", "vscode", "agy"])]
    pub client: String,
    /// The profile its entry names (default: the client's own from `clients:`, else `default`).
    #[arg(long)]
    pub profile: Option<String>,
    /// The project's file (in this directory) instead of the user's.
    #[arg(long)]
    pub project: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ServiceCommand {
    /// Write the user unit (or LaunchAgent) and its environment file (PATH and the variables
    /// the config refers to, from this shell).
    Install {
        /// Write them (default: print them); then enable and start the service when a
        /// service manager answers.
        #[arg(long)]
        apply: bool,
        /// Write the files only: do not enable or start the service.
        #[arg(long)]
        no_start: bool,
    },
    /// Stop the service, then remove the unit (the environment file stays).
    Uninstall {
        /// Remove it (default: say what would go).
        #[arg(long)]
        apply: bool,
    },
    /// Whether the unit is installed and current.
    Status,
    /// Have the service manager read the installed unit and run the daemon now (systemd:
    /// daemon-reload and start; launchd: load -w).
    Load,
    /// Have the service manager stop the daemon and let go of the unit, which stays
    /// installed (systemd: stop; launchd: unload -w).
    Unload,
}

#[derive(Debug, Subcommand)]
pub(crate) enum AuthCommand {
    /// Sign in to a remote upstream: prints the address to open, waits for the redirect, and
    /// keeps the tokens under state/oauth/ (refreshed by the daemon).
    Login {
        /// The upstream's name in the configuration.
        upstream: String,
        /// A scope to ask for (repeatable); default: what the server says it needs.
        #[arg(long = "scope")]
        scopes: Vec<String>,
        /// How long to wait for the sign-in to finish, in seconds.
        #[arg(long, default_value_t = 300)]
        timeout_s: u64,
    },
    /// Forget an upstream's sign-in.
    Logout { upstream: String },
    /// Which remote upstreams are signed in.
    Status {
        /// Print the sign-ins as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ToolsCommand {
    /// Ranked tools for a task, e.g. `tools search "read a file"`.
    Search {
        /// What the tool should do, in words ("read a file", "open an issue").
        query: String,
        /// Only tools of this upstream.
        #[arg(long)]
        server: Option<String>,
        /// How many results at most (default 10).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Full definitions of tools by exposed name.
    Describe {
        /// Exposed tool names, e.g. `example.echo`.
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Call a tool: `tools call fs.read_file --args '{"path": "/tmp/x"}'`.
    Call {
        /// The tool's exposed name, e.g. `example.echo`.
        name: String,
        /// Arguments as a JSON object.
        #[arg(long)]
        args: Option<String>,
        /// `{"paths": [...], "max_array_items": N, "max_chars": N}`.
        #[arg(long)]
        projection: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ExecCommand {
    /// Run FILE (`-` for stdin): `exec run job.py --allow 'example.*'`.
    Run {
        /// The program to run (`.py` or `.js`).
        file: String,
        /// python or javascript (default: from the file's extension, else python).
        #[arg(long)]
        language: Option<String>,
        /// Glob over tool names the program may call; repeat for more.
        #[arg(long)]
        allow: Vec<String>,
        /// Refuse every tool that may change something.
        #[arg(long)]
        read_only: bool,
        /// Run in this open workspace instead of a fresh one (from `exec open`).
        #[arg(long)]
        exec_id: Option<String>,
        /// Run FILE as a workspace file (`entry`) of --exec-id instead of sending it.
        #[arg(long, requires = "exec_id")]
        entry: bool,
        /// Limits as JSON, e.g. '{"wall_clock_ms": 5000}' (lower than the profile's only).
        #[arg(long)]
        limits: Option<String>,
    },
    /// Open a workspace for several runs; prints its exec id.
    Open {
        /// Keep the workspace after `exec close` (default: the profile's `exec.persist`).
        #[arg(long)]
        persist: bool,
    },
    /// Copy a local file into a workspace: `exec upload ID data.csv --as input/data.csv`.
    Upload {
        /// The workspace's id (from `exec open`).
        exec_id: String,
        /// The file to copy into the workspace.
        file: String,
        /// Path in the workspace (default: the file's name).
        #[arg(long = "as")]
        dest: Option<String>,
    },
    /// Close a workspace (removed unless opened with --persist; --discard removes it anyway).
    Close {
        exec_id: String,
        /// Remove the workspace even when it was opened with --persist.
        #[arg(long)]
        discard: bool,
    },
    /// Every workspace on disk (of --profile, or all): persisted or open, size, idle time.
    List,
    /// Remove persisted workspaces unused for longer than `broker.exec.persist_ttl_ms`.
    Prune {
        /// Remove every workspace no run holds, persisted or not, whatever its age.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum PinsCommand {
    /// Every cached tool: approved or quarantined (and why), with scan findings.
    List {
        /// Print every cached tool as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve quarantined tools (shows each diff), by `<upstream>.<tool>` or all of them.
    Approve {
        /// Tools to approve, as `<upstream>.<tool>`.
        names: Vec<String>,
        /// Approve every quarantined tool.
        #[arg(long)]
        all: bool,
        /// Move an unreadable pin store aside and start a new one.
        #[arg(long)]
        reset: bool,
        /// Approve tools with description findings without asking.
        #[arg(long)]
        yes: bool,
        /// Who approves, for the audit log (the console says `console`).
        #[arg(long, hide = true, default_value = "cli")]
        by: String,
        /// Approve only if the tool's definition is still this one (`hash` in
        /// `pins list --json`): what was looked at is what gets approved.
        #[arg(long, value_name = "HASH")]
        expect_hash: Option<String>,
    },
    /// Reject quarantined tools: they stay hidden, and are no longer put to anyone, until
    /// their definition changes again.
    Reject {
        /// Tools to reject, as `<upstream>.<tool>`.
        names: Vec<String>,
        /// Who rejects, for the audit log.
        #[arg(long, hide = true, default_value = "cli")]
        by: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum SandboxCommand {
    /// Start the upstream under its sandbox policy (no daemon needed), list its tools, and show
    /// its grants and what the kernel refused it (its system calls are traced for the check).
    Check {
        /// The upstream.
        name: String,
        /// Also call this tool (its own name) after listing, and show what the call was refused.
        #[arg(long, value_name = "TOOL")]
        call: Option<String>,
        /// The call's arguments, as JSON.
        #[arg(long, value_name = "JSON", default_value = "{}", requires = "call")]
        args: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ProfileCommand {
    /// What the profile shows a client: raw tools, the compact facade, or a token budget
    /// (raw when the tools fit, else the facade and the tools its clients call most). Writes
    /// broker.yaml and has a running daemon reload it.
    Set {
        /// The profile.
        profile: String,
        #[command(flatten)]
        view: ViewArgs,
    },
    /// Each upstream's `smoke` probe (search, describe, and a call with `call: true`) through
    /// the profile's view, as a pass/fail table; fails when a step fails.
    Validate {
        /// The profile.
        profile: String,
    },
    /// The calls to paste into a live Codex or Claude Code session to accept the profile by
    /// hand, from each upstream's `smoke` probe, in the names that client shows its model.
    /// Starts nothing.
    Acceptance {
        /// The profile.
        profile: String,
        /// Only this client's names (default: Codex and Claude Code).
        #[arg(long, value_parser = ["codex", "claude-code"])]
        client: Option<String>,
        /// The broker's server entry name in the client (what `client apply` writes).
        #[arg(long, default_value = "mcp-broker")]
        server: String,
    },
    /// The broker's entry for an MCP client not among those `client` knows, as JSON to paste
    /// into its config file: `{"mcpServers": {"mcp-broker": {...}}}` starting the profile.
    Snippet {
        /// The profile the client is to see.
        profile: String,
        /// The key the client's file keeps its servers under.
        #[arg(long, default_value = "mcpServers")]
        key: String,
        /// The entry's name in the client.
        #[arg(long, default_value = "mcp-broker")]
        server: String,
        /// A client name for the shim (`--client`), matched against `clients` in the config.
        #[arg(long)]
        client: Option<String>,
        /// Say `"type": "stdio"` in the entry (clients such as VS Code want it).
        #[arg(long)]
        typed: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Write the commented example config to the runtime root (never overwrites).
    Init,
    /// Check a config file; lists every error with its location.
    Validate {
        /// File to check (default: the file the daemon would use).
        path: Option<PathBuf>,
    },
    /// Print the JSON Schema of the config file.
    Schema,
    /// An MCP Exec Broker config (JSON) as upstreams, a profile in that broker's tool names
    /// and its exec settings: a dry run (a diff of broker.yaml) unless --apply.
    Import(ConfigImportArgs),
    /// Print the resolved settings as YAML (secrets stay references).
    Show {
        /// JSON instead of YAML.
        #[arg(long)]
        json: bool,
    },
    /// Keep a copy of the config file beside the client files' backups; prints its path.
    Backup,
    /// Put the newest (or a named) backup of the config file back, after checking it; the file
    /// it replaces is kept as a backup too.
    Rollback {
        /// The backup's name (`broker.yaml.<unix seconds>`; default: the newest).
        #[arg(long)]
        backup: Option<String>,
    },
}

/// What `config import` was told.
#[derive(Debug, clap::Args)]
pub(crate) struct ConfigImportArgs {
    /// The exec broker's JSON config (default: $MCP_EXEC_CONFIG).
    pub file: Option<PathBuf>,
    /// The profile that serves the targets in the exec broker's tool names.
    #[arg(long, default_value = "exec-broker")]
    pub profile: String,
    /// Import target OLD as upstream NEW (repeatable).
    #[arg(long, value_name = "OLD=NEW")]
    pub rename: Vec<String>,
    /// Leave this target out (repeatable).
    #[arg(long, value_name = "TARGET")]
    pub skip: Vec<String>,
    /// The profile hides mutating tools, except those a target's `tools_allow` names.
    #[arg(long)]
    pub read_only: bool,
    /// The targets run unsandboxed (they get the standard sandbox otherwise).
    #[arg(long)]
    pub no_sandbox: bool,
    /// Write what the last dry run showed.
    #[arg(long)]
    pub apply: bool,
}

// The arguments of `add`.
#[derive(Debug, clap::Args)]
pub(crate) struct AddArgs {
    /// The upstream's name; its tools are named `<name>.<tool>`.
    pub name: String,
    /// A remote server's URL instead of a command.
    #[arg(long)]
    pub url: Option<String>,
    /// How to reach --url.
    #[arg(long, value_parser = ["streamable_http", "sse"])]
    pub transport: Option<String>,
    /// An HTTP header for --url, `KEY=VALUE` (secrets as `Authorization=Bearer ${TOKEN}`).
    #[arg(long = "header")]
    pub headers: Vec<String>,
    /// An environment variable for the command, `KEY=VALUE` (secrets as `KEY=${NAME}`).
    #[arg(long = "env")]
    pub env: Vec<String>,
    /// When processes start and stop.
    #[arg(long, value_parser = ["shared", "per_session", "per_call", "disabled"])]
    pub lifecycle: Option<String>,
    /// Run the command unsandboxed (it gets the standard sandbox otherwise).
    #[arg(long)]
    pub no_sandbox: bool,
    /// A profile whose upstreams list gets it (repeatable); default: every client's
    /// profile that lists its upstreams (a profile without a list sees it anyway).
    #[arg(long)]
    pub profile: Vec<String>,
    /// The server's command and arguments, after `--`.
    #[arg(last = true)]
    pub command: Vec<String>,
}

// The arguments of `stdio`.
#[derive(Debug, clap::Args)]
pub(crate) struct StdioArgs {
    /// Profile to use (default: the client's entry in `clients`, else `default`).
    #[arg(long)]
    pub profile: Option<String>,
    /// Client name, matched against `clients` in the config.
    #[arg(long)]
    pub client: Option<String>,
    /// Write the default config first when there is none (for package installs).
    #[arg(long)]
    pub init_if_missing: bool,
}

// The arguments of `measure`.
#[derive(Debug, clap::Args)]
pub(crate) struct MeasureArgs {
    /// Profile whose view to use (default: the `default` profile).
    #[arg(long, conflicts_with_all = ["client", "all_clients"])]
    pub profile: Option<String>,
    /// A client's context before it moved onto the broker (its newest backup) and after
    /// (the broker's entry plus the servers it still starts), each server listed.
    #[arg(long, value_parser = ["claude-desktop", "claude-code", "codex", "gemini", "cursor", "vscode", "agy"])]
    pub client: Option<String>,
    /// --client for every client with servers or a broker entry here.
    #[arg(long, conflicts_with = "client")]
    pub all_clients: bool,
    /// Print the data as JSON instead of a table or text.
    #[arg(long)]
    pub json: bool,
}

// The arguments of `tools`.
#[derive(Debug, clap::Args)]
pub(crate) struct ToolsArgs {
    /// Profile to use (default: `default`).
    #[arg(long, global = true)]
    pub profile: Option<String>,
    /// Print the data as JSON (once, without the MCP envelope).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: ToolsCommand,
}

// The arguments of `exec`.
#[derive(Debug, clap::Args)]
pub(crate) struct ExecArgs {
    /// Profile to use (default: `compact`, the embedded default's profile with code runs).
    #[arg(long, global = true)]
    pub profile: Option<String>,
    /// Print the whole answer as JSON.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: ExecCommand,
}

// The arguments of `uninstall`.
#[derive(Debug, clap::Args)]
pub(crate) struct UninstallArgs {
    /// Do it (default: say what would be done).
    #[arg(long)]
    pub apply: bool,
    /// Also remove the runtime dir (config, secrets, logs, state) and the backups.
    #[arg(long)]
    pub purge: bool,
    /// Put backups back even over a change made since.
    #[arg(long)]
    pub force: bool,
}

// The arguments of `logs`.
#[derive(Debug, clap::Args)]
pub(crate) struct LogsArgs {
    /// Only this upstream's lines.
    pub upstream: Option<String>,
    /// How many of the last lines to print.
    #[arg(short = 'n', long, default_value_t = 50)]
    pub lines: usize,
    /// Keep printing lines as they are written (Ctrl-C ends it).
    #[arg(short, long)]
    pub follow: bool,
}

// The arguments of `parity`.
#[derive(Debug, clap::Args)]
pub(crate) struct ParityArgs {
    /// The first profile.
    pub first: String,
    /// The second profile.
    pub second: String,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The view a user asked a profile to have (`--raw`, `--compact`, `--budget N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ViewAsk {
    Raw,
    Compact,
    Budget(u32),
}

impl ViewAsk {
    /// From the flags: `None` when none was given.
    pub(crate) fn from_flags(raw: bool, compact: bool, budget: Option<u32>) -> Option<Self> {
        match (raw, compact, budget) {
            (true, _, _) => Some(ViewAsk::Raw),
            (_, true, _) => Some(ViewAsk::Compact),
            (_, _, Some(n)) => Some(ViewAsk::Budget(n)),
            _ => None,
        }
    }
}
