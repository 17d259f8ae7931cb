// MCP's official TypeScript SDK client, run by Node, against the reference server-everything
// directly (stdio) or through otel-loopguard mcp-proxy --listen (streamable HTTP): what it sees
// (the server's capabilities and tools, the tools that use sampling, elicitation and roots, and
// which of those requests the server sent it), as one JSON line.
// argv: SDK_DIR COMMAND [ARG ...] (over stdio), or SDK_DIR URL (streamable HTTP).
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, command, ...args] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(path.join(sdkDir, "dist", "esm", p)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const types = await load("types.js");

const requests = new Set();
const transport = /^https?:/.test(command)
  ? new StreamableHTTPClientTransport(new URL(command))
  : new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client(
  { name: "loopguard-ts-everything", version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
);
client.setRequestHandler(types.CreateMessageRequestSchema, async () => {
  requests.add("sampling/createMessage");
  return { role: "assistant", content: { type: "text", text: "sampled" }, model: "m" };
});
client.setRequestHandler(types.ElicitRequestSchema, async () => {
  requests.add("elicitation/create");
  return { action: "decline" };
});
client.setRequestHandler(types.ListRootsRequestSchema, async () => {
  requests.add("roots/list");
  return { roots: [{ uri: "file:///work/root", name: "root" }] };
});
await client.connect(transport);
const seen = {
  capabilities: client.getServerCapabilities(),
  serverVersion: client.getServerVersion(),
  instructions: client.getInstructions(),
  tools: (await client.listTools()).tools,
  calls: {},
};
const calls = [
  ["echo", { message: "hello" }],
  ["get-sum", { a: 2, b: 3 }],
  ["get-structured-content", { location: "Chicago" }],
  ["trigger-sampling-request", { prompt: "hi", maxTokens: 5 }],
  ["trigger-elicitation-request", {}],
  ["get-roots-list", {}],
];
for (const [name, callArgs] of calls) {
  seen.calls[name] = await client.callTool({ name, arguments: callArgs });
}
seen.requests = [...requests].sort();
await client.close();
console.log(JSON.stringify(seen));
