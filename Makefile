# The design's command names as make targets. Each one runs the broker's own command or a
# script under scripts/; nothing here has logic of its own. `make help` lists them.
# BROKER: the binary to run (default: the debug build, built first).
# P: a profile (profile-validation, facade-smoke); C: a client (client targets).

BROKER ?= target/debug/mcp-broker
P ?= default
C ?= claude-code

.PHONY: help build setup test test-unit test-cov quality-gate release-gate release-smoke \
	mutation broker-start broker-status broker-stop broker-reap broker-smoke doctor \
	config-init config-validate config-render config-backup config-rollback tools-count \
	profile-validation facade-smoke discovery-parity context-reduction import-context \
	client-render client-apply client-rollback client-import uninstall \
	systemd-install systemd-uninstall systemd-status systemd-load systemd-unload \
	release-version-check precommit hooks-install profile-snippet codex-deferred-acceptance \
	codex-app-policy container-image container-smoke

# Per-client variants: facade-smoke-<client> and profile-validation-<client> take the profile
# `client import` made for that client (named after it).
CLIENTS := claude-desktop claude-code codex gemini cursor vscode agy

help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

build: ## build the broker (debug)
	cargo build -p mcp-broker

setup: ## install the real MCP servers and clients the tests use (.test-deps/)
	scripts/install-test-deps

test: ## the whole test command (fmt, clippy, every test, soak, mutation sample, packages)
	scripts/test

test-unit: ## unit tests only (no process started)
	cargo test --workspace --lib --bins

test-cov: ## line coverage with the per-crate floors
	scripts/coverage

quality-gate: release-gate ## the release gate (alias)

release-gate: ## fmt, clippy, tests, coverage, mutation, release smoke, in order
	scripts/release-gate

release-smoke: ## the packages built from the release binary, run in clean homes
	scripts/release-smoke

container-image: ## the image mcp-broker:local, from local files only (FROM scratch; podman or docker)
	scripts/container-image

container-smoke: ## that image serving the Python SDK client on stdio and over the HTTP front
	scripts/container-smoke

mutation: ## the whole mutation set and its score
	scripts/mutation

release-version-check: ## Cargo version, binary, formula, packages, CHANGELOG and tag agree
	scripts/release-version-check

precommit: ## what the pre-commit hook runs: fmt, clippy, the secret scan of staged files
	scripts/precommit

hooks-install: ## install the pre-commit hook (.git/hooks/pre-commit runs scripts/precommit)
	scripts/hooks-install

broker-start: build ## start the daemon
	$(BROKER) start

broker-status: build ## the daemon, its upstreams and calls
	$(BROKER) status

broker-stop: build ## stop the daemon and its upstreams
	$(BROKER) stop

broker-reap: build ## stop processes a dead daemon left behind
	$(BROKER) reap

broker-smoke: build ## the demo: a client session through the broker in a throwaway home
	$(BROKER) demo

doctor: build ## check this machine, the config and the clients
	$(BROKER) doctor

config-init: build ## write the commented default config
	$(BROKER) config init

config-validate: build ## check the config file
	$(BROKER) config validate

config-render: build ## the resolved settings
	$(BROKER) config show

config-backup: build ## keep a copy of the config file
	$(BROKER) config backup

config-rollback: build ## put the newest copy back
	$(BROKER) config rollback

tools-count: build ## tool definitions and tokens a profile puts in context (P=profile)
	$(BROKER) measure --profile $(P)

profile-validation: build ## each upstream of a profile started and probed (P=profile)
	$(BROKER) profile validate $(P)

facade-smoke: build ## the calls to paste into a live client session to accept profile P
	$(BROKER) profile acceptance $(P)

$(addprefix facade-smoke-,$(CLIENTS)): facade-smoke-%: build
	$(BROKER) profile acceptance $*

$(addprefix profile-validation-,$(CLIENTS)): profile-validation-%: build
	$(BROKER) profile validate $*

codex-deferred-acceptance: build ## the calls to paste into Codex (its tools load deferred) for profile codex
	$(BROKER) profile acceptance codex --client codex

codex-app-policy: build ## Codex's hosted apps; ALLOW=app,app/tool limits them (a dry run; APPLY=1 writes, after a backup)
	$(BROKER) client codex-apps $(if $(ALLOW),--allow $(ALLOW)) $(if $(APPLY),--apply)

profile-snippet: build ## the broker's entry for any other JSON-config MCP client (P=profile)
	$(BROKER) profile snippet $(P)

discovery-parity: build ## a client's tools directly and through the broker (C=client)
	$(BROKER) client parity --client $(C)

context-reduction: build ## a Codex user's context before and after import
	scripts/context-reduction

import-context: build ## each client's context after an import with the defaults
	scripts/import-context

client-render: build ## the broker's entry in a client's file, as a diff (C=client)
	$(BROKER) client render --client $(C)

client-apply: build ## write that entry, after a backup (C=client)
	$(BROKER) client apply --client $(C)

client-rollback: build ## put the client's file back (C=client)
	$(BROKER) client rollback --client $(C)

client-import: build ## move a client's servers into the broker, as a dry run (C=client)
	$(BROKER) client import --client $(C)

uninstall: build ## what uninstalling would do (then: mcp-broker uninstall --apply)
	$(BROKER) uninstall

systemd-install: build ## the user service, as a dry run (then: mcp-broker service install --apply)
	$(BROKER) service install

systemd-uninstall: build ## stop and remove the service, as a dry run
	$(BROKER) service uninstall

systemd-status: build ## whether the unit is installed and current
	$(BROKER) service status

systemd-load: build ## the service manager runs the installed unit now
	$(BROKER) service load

systemd-unload: build ## the service manager stops it; the unit stays installed
	$(BROKER) service unload
