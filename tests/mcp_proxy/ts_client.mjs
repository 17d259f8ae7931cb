// MCP's official TypeScript SDK client, run by Node, drives otel-loopguard mcp-proxy over stdio.
// argv: SDK_DIR CALLS COMMAND [ARG ...]. Prints one JSON line per call: {isError, text}.
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, calls, command, ...args] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(path.join(sdkDir, "dist", "esm", p)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");

const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "loopguard-ts-test", version: "1.0.0" });
await client.connect(transport);
for (let i = 0; i < Number(calls); i++) {
  const result = await client.callTool({ name: "read_file", arguments: { path: "notes.txt" } });
  const text = result.content.filter((p) => p.type === "text").map((p) => p.text).join("\n");
  console.log(JSON.stringify({ isError: result.isError === true, text }));
}
await client.close();
