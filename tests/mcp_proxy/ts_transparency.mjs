// MCP's official TypeScript SDK client, run by Node, against a server directly or through
// otel-loopguard mcp-proxy: what it sees of the server (capabilities, server info, tools with
// their `execution`, the server's sampling/elicitation/roots requests, notifications), as one
// JSON line. argv: SDK_DIR COMMAND [ARG ...] (over stdio), or SDK_DIR URL (streamable HTTP).
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, command, ...args] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(path.join(sdkDir, "dist", "esm", p)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const types = await load("types.js");

const seen = { requests: [], notifications: [] };
const transport = /^https?:/.test(command)
  ? new StreamableHTTPClientTransport(new URL(command))
  : new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client(
  { name: "loopguard-ts-transparency", version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } },
);
client.setRequestHandler(types.CreateMessageRequestSchema, async () => {
  seen.requests.push("sampling/createMessage");
  return { role: "assistant", content: { type: "text", text: "sampled" }, model: "m" };
});
client.setRequestHandler(types.ElicitRequestSchema, async () => {
  seen.requests.push("elicitation/create");
  return { action: "accept", content: { n: "Ann" } };
});
client.setRequestHandler(types.ListRootsRequestSchema, async () => {
  seen.requests.push("roots/list");
  return { roots: [{ uri: "file:///work/root", name: "root" }] };
});
client.setNotificationHandler(types.ToolListChangedNotificationSchema, async (n) => {
  seen.notifications.push(n.method);
});
client.setNotificationHandler(types.LoggingMessageNotificationSchema, async (n) => {
  seen.notifications.push(n.method);
});
await client.connect(transport);
seen.capabilities = client.getServerCapabilities();
seen.serverVersion = client.getServerVersion();
seen.tools = (await client.listTools()).tools;
seen.ask = await client.callTool({ name: "ask", arguments: {} });
seen.notify = await client.callTool({ name: "notify", arguments: {} });
await new Promise((resolve) => setTimeout(resolve, 200)); // notifications handled
await client.close();
console.log(JSON.stringify(seen));
