// The SDK of a JavaScript run: callTool, saveArtifact, result, ToolError, console. Requests
// travel as JSON lines over the run's channel (the native __send); answers come back through
// __deliver, called by the worker whenever the program waits on one.
"use strict";
(() => {
  const pending = new Map();
  class ToolError extends Error {
    constructor(message, kind) {
      super(message);
      this.name = "ToolError";
      this.kind = kind || "tool";
    }
  }
  const request = (method, params) =>
    new Promise((resolve, reject) => {
      const id = __send(method, JSON.stringify(params));
      pending.set(id, { resolve, reject });
    });
  const deliver = (id, text) => {
    if (id === null) {
      // An error the broker could not tie to a request: fail them all.
      const answer = JSON.parse(text);
      const message = (answer.error && answer.error.message) || "malformed request";
      for (const w of pending.values()) w.reject(new ToolError(message, "protocol"));
      pending.clear();
      return;
    }
    const waiter = pending.get(id);
    if (!waiter) return;
    pending.delete(id);
    const answer = JSON.parse(text);
    if (answer.error) waiter.reject(new ToolError(answer.error.message, answer.error.kind));
    else waiter.resolve(answer.result);
  };
  const show = (v) => {
    if (typeof v === "string") return v;
    if (v instanceof Error) return v.stack ? `${v.name}: ${v.message}\n${v.stack}` : `${v.name}: ${v.message}`;
    try {
      const s = JSON.stringify(v);
      return s === undefined ? String(v) : s;
    } catch (e) {
      return String(v);
    }
  };
  const b64 = (bytes) => {
    const abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let out = "";
    for (let i = 0; i < bytes.length; i += 3) {
      const n = (bytes[i] << 16) | ((bytes[i + 1] || 0) << 8) | (bytes[i + 2] || 0);
      out += abc[(n >> 18) & 63] + abc[(n >> 12) & 63];
      out += i + 1 < bytes.length ? abc[(n >> 6) & 63] : "=";
      out += i + 2 < bytes.length ? abc[n & 63] : "=";
    }
    return out;
  };
  Object.defineProperties(globalThis, {
    ToolError: { value: ToolError },
    callTool: {
      value: (name, args) => {
        if (args !== undefined && (args === null || typeof args !== "object" || Array.isArray(args)))
          return Promise.reject(new TypeError("arguments must be an object"));
        return request("call_tool", { name: String(name), arguments: args || {} });
      },
    },
    saveArtifact: {
      value: (name, data) => {
        if (typeof data === "string") return request("save_artifact", { name: String(name), text: data }).then((r) => r.id);
        if (data instanceof Uint8Array) return request("save_artifact", { name: String(name), base64: b64(data) }).then((r) => r.id);
        return Promise.reject(new TypeError("data must be a string or a Uint8Array"));
      },
    },
    result: {
      value: (value) => {
        const text = JSON.stringify(value);
        return request("result", { value: text === undefined ? null : JSON.parse(text) });
      },
    },
    console: {
      value: {
        log: (...a) => __print(1, a.map(show).join(" ")),
        info: (...a) => __print(1, a.map(show).join(" ")),
        warn: (...a) => __print(2, a.map(show).join(" ")),
        error: (...a) => __print(2, a.map(show).join(" ")),
      },
    },
    __deliver: { value: deliver },
    __closed: {
      value: (message) => {
        for (const waiter of pending.values()) waiter.reject(new ToolError(message, "channel"));
        pending.clear();
      },
    },
    __waiting: { value: () => pending.size },
  });
})();
