// A Vercel AI SDK agent in Node: the real `ai` package's generateText with its OpenTelemetry
// telemetry on (experimental_telemetry: { isEnabled: true }), a stubborn mock model from
// `ai/test` that asks for the same tool call at every step, and the spans exported with the
// official @opentelemetry/sdk-trace-node and the OTLP protobuf exporter.
//
// node receive_vercel_agent.cjs URL STEPS   (URL: an OTLP/HTTP traces endpoint; STEPS: how many
// model calls the agent makes). Modules from NODE_PATH.
"use strict";
const { NodeTracerProvider } = require("@opentelemetry/sdk-trace-node");
const { BatchSpanProcessor } = require("@opentelemetry/sdk-trace-base");
const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-proto");
const { generateText, jsonSchema, stepCountIs, tool } = require("ai");
const { MockLanguageModelV3 } = require("ai/test");

const [url, stepsText] = process.argv.slice(2);
const steps = Number(stepsText);
// One batch, sent at the end: one request, its spans in the order they ended.
const processor = new BatchSpanProcessor(new OTLPTraceExporter({ url }), {
  maxExportBatchSize: 4096,
  maxQueueSize: 4096,
  scheduledDelayMillis: 600000,
});
const provider = new NodeTracerProvider({ spanProcessors: [processor] });
provider.register();

const usage = {
  inputTokens: { total: 100, noCache: 100, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 10, text: 10, reasoning: 0 },
};
let calls = 0;
// Asks for the same file at every step: the loop a stubborn model makes.
const model = new MockLanguageModelV3({
  provider: "mock",
  modelId: "stubborn",
  doGenerate: async () => {
    calls += 1;
    return {
      content: [
        {
          type: "tool-call",
          toolCallId: `call_${calls}`,
          toolName: "read_file",
          input: JSON.stringify({ path: "a.txt" }),
        },
      ],
      finishReason: { unified: "tool-calls", raw: "tool_calls" },
      usage,
      warnings: [],
    };
  },
});

async function main() {
  await generateText({
    model,
    prompt: "Fix the bug in a.txt",
    tools: {
      read_file: tool({
        description: "Read a file",
        inputSchema: jsonSchema({
          type: "object",
          properties: { path: { type: "string" } },
          required: ["path"],
        }),
        execute: async ({ path }) => `contents of ${path}`,
      }),
    },
    stopWhen: stepCountIs(steps),
    experimental_telemetry: { isEnabled: true, functionId: "coder" },
  });
  await provider.forceFlush();
  await provider.shutdown();
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
