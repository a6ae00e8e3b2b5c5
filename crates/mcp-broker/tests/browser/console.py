"""The web console in a real browser (Debian's Chromium, headless, driven by Playwright).

Run by the suite's console test with the broker's environment (MCP_BROKER_HOME,
MCP_BROKER_CONFIG) and MCPB_BIN, the mcp-broker binary:

  console.py LOGIN_URL SCREENSHOT_DIR FORWARDING_PAGE

FORWARDING_PAGE is the file `mcp-broker console` hands a browser; the walk starts from it, as
a person's does.

It opens the console without the key and with it, reads a failed upstream's reason, searches
the tools, approves a quarantined tool, watches a call appear live, filters the audit log,
measures a profile, and sends a forged action from a page of another origin. Each page is
screenshotted. Any JavaScript error on the console's own pages fails the run. Prints one JSON
object of what it saw; the Rust side checks the broker's state from the CLI afterwards.
"""

import http.server
import json
import re
import os
import subprocess
import sys
import threading
from urllib.parse import urlsplit

from playwright.sync_api import expect, sync_playwright

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def cli(*args):
    """The broker's CLI, as the console's user would run it."""
    out = subprocess.run([os.environ["MCPB_BIN"], *args], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise AssertionError(f"mcp-broker {' '.join(args)} failed: {out.stderr}")
    return out.stdout


def forger(target):
    """A page on another origin (a loopback listener of our own) whose form posts an approval
    to the console without the form token, the way a hostile site would; it is even given the
    session's path (`target`), which a real one could not know."""
    page = f"""<!DOCTYPE html><form id="f" method="post" action="{target}trust">
<input type="hidden" name="tool" value="fx.sneaky">
<input type="hidden" name="verdict" value="approve"></form>
<script>document.getElementById("f").submit();</script>"""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    login, shots, forwarding = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(shots, exist_ok=True)
    base = "{0.scheme}://{0.netloc}".format(urlsplit(login))
    seen = {}
    errors = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)

        # Without the key: nothing of the broker is shown.
        stranger = browser.new_page()
        stranger.goto(base + "/servers")
        seen["without_key"] = stranger.inner_text("body")
        stranger.screenshot(path=f"{shots}/0-without-key.png")
        stranger.close()

        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))

        try:
            walk(page, context, "file://" + forwarding, base, shots, seen)
        except Exception:
            # What the page showed when a step failed, for the test's message.
            page.screenshot(path=f"{shots}/failed.png", full_page=True)
            print(f"url: {page.url}\npage: {page.inner_text('body')}\njs errors: {errors}", file=sys.stderr)
            raise
        context.close()
        browser.close()
    seen["js_errors"] = errors
    print(json.dumps(seen))


def walk(page, context, login, base, shots, seen):
    if True:
        page.goto(login)
        expect(page).to_have_url(re.compile(re.escape(base) + "/s/[0-9a-f]{64}/servers$"))
        seen["url_after_login"] = page.url
        home = page.url[: -len("servers")]
        seen["broken_row"] = page.inner_text("#server-broken")
        seen["broken_reason"] = page.inner_text("#servers tr.detail")
        page.screenshot(path=f"{shots}/1-servers.png", full_page=True)

        page.click("nav >> text=Tools")
        page.fill("input[name=q]", "look up a word")
        page.click("form.search button")
        expect(page.locator("#tools tbody tr").first).to_contain_text("fx.lookup")
        seen["search_first"] = page.inner_text("#tools tbody tr >> nth=0")
        page.screenshot(path=f"{shots}/2-tools.png", full_page=True)
        page.click("#tools a >> text=fx.lookup")
        seen["schema"] = page.inner_text("pre.json")
        page.screenshot(path=f"{shots}/3-tool.png", full_page=True)

        page.click("nav >> text=Trust")
        seen["trust_before"] = page.inner_text("main")
        page.screenshot(path=f"{shots}/4-trust.png", full_page=True)
        page.click("#q-fx\\.helper button[value=approve]")
        expect(page.locator("#flash")).to_contain_text("approved")
        seen["approve_flash"] = page.inner_text("#flash")
        seen["trust_after"] = page.inner_text("main")
        page.screenshot(path=f"{shots}/5-trust-approved.png", full_page=True)

        # A hostile page of another origin posts an approval without the token.
        server = forger(home)
        hostile = context.new_page()
        answer = {}
        hostile.on("response", lambda r: answer.setdefault(r.url, r.status) if "/trust" in r.url else None)
        hostile.goto(f"http://127.0.0.1:{server.server_port}/")
        hostile.wait_for_load_state("load")
        hostile.wait_for_timeout(500)
        seen["forged_status"] = answer.get(home + "trust")
        seen["forged_page"] = hostile.inner_text("body")
        hostile.close()
        server.shutdown()

        page.click("nav >> text=Activity")
        expect(page.locator("#live-state")).to_contain_text("watching")
        cli("tools", "call", "fx.lookup", "--args", '{"q": "live"}')
        expect(page.locator("#live-rows tr").first).to_contain_text("fx.lookup", timeout=10000)
        seen["live_row"] = page.inner_text("#live-rows tr >> nth=0")
        page.screenshot(path=f"{shots}/6-activity-live.png", full_page=True)
        page.fill("input[name=upstream]", "fx")
        page.select_option("select[name=outcome]", "ok")
        page.click("form.filters button")
        seen["filtered_url"] = page.url
        seen["filtered_rows"] = page.locator("#audit tbody tr").all_inner_texts()
        page.screenshot(path=f"{shots}/7-activity-filtered.png", full_page=True)

        page.click("nav >> text=Context")
        page.click("#profile-default button")
        expect(page.locator("#flash")).to_contain_text("measured profile default", timeout=60000)
        seen["context"] = page.inner_text("#profile-default")
        page.screenshot(path=f"{shots}/8-context.png", full_page=True)

        page.click("nav >> text=Charts")
        seen["charts"] = page.locator("section.series svg").count()
        seen["chart_fx"] = page.inner_text("#chart-fx")
        page.screenshot(path=f"{shots}/9-charts.png", full_page=True)


if __name__ == "__main__":
    main()
