// The console's only script: the Activity page's live calls, read from the daemon's
// server-sent events and added as text (never as markup) at the top of the live table.
"use strict";
(function () {
  const rows = document.getElementById("live-rows");
  const state = document.getElementById("live-state");
  if (!rows || !state) {
    return;
  }
  const keys = ["ts", "client", "profile", "upstream", "tool", "outcome", "ms", "error"];
  const source = new EventSource("activity/live");
  source.onopen = function () {
    state.textContent = "watching: calls appear here as they are made";
  };
  source.onerror = function () {
    state.textContent = "not connected; retrying";
  };
  source.onmessage = function (event) {
    let line;
    try {
      line = JSON.parse(event.data);
    } catch (e) {
      return;
    }
    const tr = document.createElement("tr");
    tr.className = "outcome-" + String(line.outcome || "");
    for (const k of keys) {
      const td = document.createElement("td");
      let v = line[k];
      if (k === "outcome" && line.event) {
        v = line.event + " by " + line.by;
      }
      if (k === "ms" && typeof v === "number") {
        v = v.toFixed(2);
      }
      td.textContent = v === undefined || v === null ? "" : String(v);
      if (k === "tool") {
        td.className = "name";
      }
      tr.appendChild(td);
    }
    rows.insertBefore(tr, rows.firstChild);
    while (rows.children.length > 200) {
      rows.removeChild(rows.lastChild);
    }
  };
})();
