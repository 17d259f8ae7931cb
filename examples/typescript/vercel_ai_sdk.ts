// otel-loopguard's HTTP check from TypeScript: a client (plain fetch, no dependencies) and a
// wrapper for Vercel AI SDK tools, checked before each call against `otel-loopguard serve`.
//
//   otel-loopguard serve                       # on 127.0.0.1:8765
//   node --experimental-strip-types vercel_ai_sdk.ts http://127.0.0.1:8765   # Node >= 22.6
//
// Run as a script, it drives a scripted agent that reads the same file again and again, and
// prints what the guard answered: a warning at the 11th call, a block at the 21st, then the
// run stopped. Only erasable TypeScript is used, so Node can run the file by stripping types.

declare const process: { argv: string[] };

/** The guard's verdict on a tool call: what `guard.check()` returns in Python. */
export interface Verdict {
  level: "ok" | "warning" | "critical";
  action: "none" | "warn" | "block" | "abort";
  detector: string | null;
  count: number;
  message: string;
  paired_tool: string | null;
  blocked: boolean;
  aborted: boolean;
}

/** A client of one run's scope (a conversation, a session, a job). */
export class LoopGuard {
  readonly url: string;
  readonly scope: string;
  readonly token: string | undefined;

  constructor(url: string, scope: string, token?: string) {
    this.url = url.replace(/\/+$/, "");
    this.scope = scope;
    this.token = token;
  }

  /** The verdict on a call before it runs (the same call id is never counted twice). */
  check(tool: string, args: unknown, callId?: string): Promise<Verdict> {
    return this.post("/v1/check", { scope: this.scope, tool, arguments: args, call_id: callId });
  }

  /** What the call returned, or the error it failed with: identical outcomes are no progress. */
  outcome(tool: string, callId: string, result: unknown, error?: string): Promise<Verdict> {
    const body = { scope: this.scope, tool, call_id: callId, result, error };
    return this.post("/v1/outcome", body);
  }

  private async post(path: string, body: object): Promise<Verdict> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    const response = await fetch(this.url + path, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as Verdict;
  }
}

/** The options the AI SDK passes a tool's `execute` and `needsApproval`. */
interface ToolCallOptions {
  toolCallId: string;
}

/** A tool as the AI SDK's `tool()` returns it (the parts the guard touches). */
interface Tool<Input, Output> {
  description?: string;
  needsApproval?: boolean | ((input: Input, options: ToolCallOptions) => Promise<boolean>);
  execute?: (input: Input, options: ToolCallOptions) => Promise<Output>;
}

/**
 * The tool, checked before each call: a blocked call does not run and the model gets the
 * guard's message as its result; a warning reaches the model with the result; each outcome is
 * reported. `ask: true` puts a blocked call to the user instead (the SDK's `needsApproval`).
 */
export function guarded<Input, Output>(
  guard: LoopGuard,
  name: string,
  tool: Tool<Input, Output>,
  options: { ask?: boolean } = {},
): Tool<Input, Output | string> {
  const execute = tool.execute;
  if (!execute) return tool;
  const wrapped: Tool<Input, Output | string> = {
    ...tool,
    execute: async (input, call) => {
      const verdict = await guard.check(name, input, call.toolCallId);
      if (verdict.blocked && !(options.ask && !verdict.aborted)) return verdict.message;
      try {
        const result = await execute(input, call);
        await guard.outcome(name, call.toolCallId, result);
        if (verdict.level === "warning") return `${JSON.stringify(result)}\n\n${verdict.message}`;
        return result;
      } catch (error) {
        await guard.outcome(name, call.toolCallId, null, String(error));
        throw error;
      }
    },
  };
  if (options.ask) {
    // Asked before execute: the same call id, so execute's check adopts this verdict.
    wrapped.needsApproval = async (input, call) =>
      (await guard.check(name, input, call.toolCallId)).blocked;
  }
  return wrapped;
}

/** A scripted agent: the model asks for the same file until the guard stops it. */
async function demo(url: string): Promise<void> {
  const guard = new LoopGuard(url, `demo-${Date.now()}`);
  const readFile = guarded(guard, "read_file", {
    description: "Read a file",
    execute: async (input: { path: string }) => ({ path: input.path, text: "TODO: fix me" }),
  });
  for (let n = 1; n <= 25; n++) {
    const out = await readFile.execute!({ path: "notes.txt" }, { toolCallId: `call-${n}` });
    const text = typeof out === "string" ? out : JSON.stringify(out);
    if (text.startsWith("CRITICAL:")) {
      console.log(`call ${n}: blocked -> ${text}`);
      const verdict = await guard.check("read_file", { path: "notes.txt" }, `call-${n}-next`);
      if (verdict.aborted) {
        console.log(`call ${n + 1}: run stopped (${verdict.detector}, ${verdict.action})`);
        return;
      }
    } else if (text.includes("WARNING:")) {
      console.log(`call ${n}: warned`);
    }
  }
}

if (import.meta.url === `file://${process.argv[1]}` && process.argv[2]) {
  await demo(process.argv[2]);
}
