// The conformance suite's server scenarios need a server with the tools, resources and prompts
// the scenarios name. This is ours: a stdio MCP server on the official TypeScript SDK that the
// broker fronts in transparent mode, so the suite talks to the broker's HTTP front and the
// broker to this.
import { McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { completable } from "@modelcontextprotocol/sdk/server/completable.js";
import { ElicitResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

// A 1x1 PNG and a tiny WAV: content the scenarios can check the type and encoding of.
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

const server = new McpServer(
  { name: "mcpb-conformance-upstream", version: "1.0.0" },
  { capabilities: { logging: {}, completions: {}, resources: { subscribe: true } } },
);
const text = (t) => ({ content: [{ type: "text", text: t }] });
const pause = (ms) => new Promise((r) => setTimeout(r, ms));

server.registerTool("test_simple_text", { description: "Simple text content" }, async () =>
  text("This is a simple text response for testing."));
server.registerTool("test_image_content", { description: "Image content" }, async () =>
  ({ content: [{ type: "image", data: PNG, mimeType: "image/png" }] }));
server.registerTool("test_audio_content", { description: "Audio content" }, async () =>
  ({ content: [{ type: "audio", data: WAV, mimeType: "audio/wav" }] }));
server.registerTool("test_embedded_resource", { description: "Embedded resource content" }, async () => ({
  content: [{ type: "resource", resource: { uri: "test://embedded-resource", mimeType: "text/plain", text: "This is an embedded resource content." } }],
}));
server.registerTool("test_multiple_content_types", { description: "Text, image and resource content" }, async () => ({
  content: [
    { type: "text", text: "Multiple content types test:" },
    { type: "image", data: PNG, mimeType: "image/png" },
    { type: "resource", resource: { uri: "test://mixed-content-resource", mimeType: "application/json", text: JSON.stringify({ test: "data", value: 123 }) } },
  ],
}));
server.registerTool("test_tool_with_logging", { description: "Logs while it runs", inputSchema: {} }, async (_a, extra) => {
  for (const step of ["Tool execution started", "Tool processing data", "Tool execution completed"]) {
    await extra.sendNotification({ method: "notifications/message", params: { level: "info", data: step } });
    await pause(50);
  }
  return text("Tool with logging executed successfully");
});
server.registerTool("test_tool_with_progress", { description: "Reports progress", inputSchema: {} }, async (_a, extra) => {
  const progressToken = extra._meta?.progressToken ?? 0;
  for (const progress of [0, 50, 100]) {
    await extra.sendNotification({ method: "notifications/progress", params: { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` } });
    await pause(50);
  }
  return text(String(progressToken));
});
server.registerTool("test_error_handling", { description: "Always fails" }, async () => {
  throw new Error("This tool intentionally returns an error for testing");
});
server.registerTool("test_sampling", { description: "Asks the client's model", inputSchema: { prompt: z.string() } }, async ({ prompt }) => {
  try {
    const r = await server.server.createMessage({ messages: [{ role: "user", content: { type: "text", text: prompt } }], maxTokens: 100 });
    return text(`LLM response: ${r.content?.text ?? "No response"}`);
  } catch (e) {
    return text(`Sampling not supported or error: ${e.message}`);
  }
});
server.registerTool("test_elicitation", { description: "Asks the user", inputSchema: { message: z.string().optional() } }, async ({ message }) => {
  try {
    const r = await server.server.elicitInput({
      message: message ?? "Please provide your information",
      requestedSchema: { type: "object", properties: { username: { type: "string", description: "User's response" }, email: { type: "string", description: "User's email address" } }, required: ["username", "email"] },
    });
    return text(`User response: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
  } catch (e) {
    return text(`Elicitation not supported or error: ${e.message}`);
  }
});

// SEP-1034 (defaults for every primitive) and SEP-1330 (the enum forms): the schemas those
// proposals define, sent as they are so the suite sees what a client receives.
const elicit = async (message, properties) => {
  try {
    const r = await server.server.request(
      { method: "elicitation/create", params: { message, requestedSchema: { type: "object", properties, required: [] } } },
      ElicitResultSchema,
    );
    return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
  } catch (e) {
    return text(`Elicitation not supported or error: ${e.message}`);
  }
};
server.registerTool("test_elicitation_sep1034_defaults", { description: "Elicitation with defaults", inputSchema: {} }, async () =>
  elicit("Please review and update the form fields with defaults", {
    name: { type: "string", description: "User name", default: "John Doe" },
    age: { type: "integer", description: "User age", default: 30 },
    score: { type: "number", description: "User score", default: 95.5 },
    status: { type: "string", description: "User status", enum: ["active", "inactive", "pending"], default: "active" },
    verified: { type: "boolean", description: "Verification status", default: true },
  }));
const choices = (prefix, titles) => titles.map((title, i) => ({ const: `${prefix}${i + 1}`, title }));
server.registerTool("test_elicitation_sep1330_enums", { description: "Elicitation with every enum form", inputSchema: {} }, async () =>
  elicit("Please select options from the enum fields", {
    untitledSingle: { type: "string", description: "Select one option", enum: ["option1", "option2", "option3"] },
    titledSingle: { type: "string", description: "Select one option with titles", oneOf: choices("value", ["First Option", "Second Option", "Third Option"]) },
    legacyEnum: { type: "string", description: "Select one option (legacy)", enum: ["opt1", "opt2", "opt3"], enumNames: ["Option One", "Option Two", "Option Three"] },
    untitledMulti: { type: "array", description: "Select multiple options", minItems: 1, maxItems: 3, items: { type: "string", enum: ["option1", "option2", "option3"] } },
    titledMulti: { type: "array", description: "Select multiple options with titles", minItems: 1, maxItems: 3, items: { anyOf: choices("value", ["First Choice", "Second Choice", "Third Choice"]) } },
  }));

server.registerResource("static-text", "test://static-text", { description: "Static text", mimeType: "text/plain" }, async () => ({
  contents: [{ uri: "test://static-text", mimeType: "text/plain", text: "This is the content of the static text resource." }],
}));
server.registerResource("static-binary", "test://static-binary", { description: "Static binary", mimeType: "image/png" }, async () => ({
  contents: [{ uri: "test://static-binary", mimeType: "image/png", blob: PNG }],
}));
server.registerResource("template", new ResourceTemplate("test://template/{id}/data", { list: undefined }), { description: "A template", mimeType: "application/json" }, async (uri, { id }) => ({
  contents: [{ uri: uri.toString(), mimeType: "application/json", text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }],
}));
const watched = new Set();
server.registerResource("watched-resource", "test://watched-resource", { description: "Changes every 3 s", mimeType: "text/plain" }, async () => ({
  contents: [{ uri: "test://watched-resource", mimeType: "text/plain", text: `Watched resource content at ${new Date().toISOString()}` }],
}));
server.server.setRequestHandler(z.object({ method: z.literal("resources/subscribe") }).passthrough(), async (req) => {
  watched.add(req.params.uri);
  return {};
});
server.server.setRequestHandler(z.object({ method: z.literal("resources/unsubscribe") }).passthrough(), async (req) => {
  watched.delete(req.params.uri);
  return {};
});
setInterval(() => {
  for (const uri of watched) server.server.sendResourceUpdated({ uri }).catch(() => {});
}, 3000).unref();

server.registerPrompt("test_simple_prompt", { description: "No arguments" }, async () => ({
  messages: [{ role: "user", content: { type: "text", text: "This is a simple prompt for testing." } }],
}));
server.registerPrompt("test_prompt_with_arguments", { description: "Two arguments", argsSchema: {
  arg1: completable(z.string(), (v) => ["paris", "park", "party"].filter((w) => w.startsWith(v ?? ""))),
  arg2: z.string(),
} }, async ({ arg1, arg2 }) => ({
  messages: [{ role: "user", content: { type: "text", text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }],
}));
server.registerPrompt("test_prompt_with_embedded_resource", { description: "Embeds a resource", argsSchema: { resourceUri: z.string() } }, async ({ resourceUri }) => ({
  messages: [
    { role: "user", content: { type: "resource", resource: { uri: resourceUri, mimeType: "text/plain", text: "Embedded resource content for testing." } } },
    { role: "user", content: { type: "text", text: "Please process the embedded resource above." } },
  ],
}));
server.registerPrompt("test_prompt_with_image", { description: "Carries an image" }, async () => ({
  messages: [
    { role: "user", content: { type: "image", data: PNG, mimeType: "image/png" } },
    { role: "user", content: { type: "text", text: "Please analyze the image above." } },
  ],
}));

await server.connect(new StdioServerTransport());
