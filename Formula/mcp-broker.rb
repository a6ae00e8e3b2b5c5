# Homebrew formula: builds mcp-broker from its source tarball with cargo.
# `scripts/package` writes the tarball and a copy of this file with its url and sha256 filled in
# (var/dist/Formula/mcp-broker.rb) for a local tap:
#   brew tap-new local/mcp-broker
#   cp var/dist/Formula/mcp-broker.rb "$(brew --repository local/mcp-broker)/Formula/"
#   brew install --build-from-source local/mcp-broker/mcp-broker
class McpBroker < Formula
  desc "Local broker for the Model Context Protocol: one daemon for every MCP client"
  homepage "https://example.invalid/mcp-broker"
  url "file:///dev/null/mcp-broker-0.1.0.tar.gz"
  version "0.1.0"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  license any_of: ["MIT", "Apache-2.0"]

  depends_on "rust" => :build
  # The daemon relies on Unix sockets, process groups, PR_SET_PDEATHSIG and Linux namespaces;
  # ROADMAP.md says what a macOS port needs.
  depends_on :linux

  def install
    system "cargo", "install", *std_cargo_args(path: "crates/mcp-broker")
  end

  service do
    run [opt_bin/"mcp-broker", "daemon"]
    keep_alive true
    log_path var/"log/mcp-broker.log"
    error_log_path var/"log/mcp-broker.log"
  end

  test do
    assert_match version.to_s, shell_output("#{bin}/mcp-broker --version")
    assert_match "done in", shell_output("#{bin}/mcp-broker demo")
  end
end
