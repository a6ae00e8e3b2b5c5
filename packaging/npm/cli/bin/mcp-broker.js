#!/usr/bin/env node
// Starts the mcp-broker binary of this platform's package with this process's arguments and
// standard streams, and ends as it ends. The binary comes in a package of its own per platform
// (an optional dependency), so an install fetches only the one it runs on.
"use strict";
const { spawn } = require("node:child_process");
const path = require("node:path");

const platform = `${process.platform}-${process.arch}`;
const pkg = `@mcp-broker/${platform}`;
let binary;
try {
  binary = path.join(path.dirname(require.resolve(`${pkg}/package.json`)), "bin", "mcp-broker");
} catch {
  process.stderr.write(
    `mcp-broker: no binary for ${platform} (the package ${pkg} is not installed)\n` +
      "hint: mcp-broker runs on Linux x86_64 with glibc; reinstall without --omit=optional, or build it with cargo\n",
  );
  process.exit(1);
}
// The client's stdin/stdout are the binary's own: `mcp-broker stdio` hands them to the daemon.
const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });
// A client stops its server with a signal: it reaches the binary, which ends its session.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (e) => {
  process.stderr.write(`mcp-broker: cannot start ${binary}: ${e.message}\n`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  }
  process.exit(code ?? 1);
});
