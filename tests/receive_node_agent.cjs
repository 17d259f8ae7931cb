// A GenAI agent in Node: the official @opentelemetry/sdk-trace-node with an OTLP exporter from
// npm (protobuf over HTTP, or gRPC), its spans shaped as the OTel GenAI conventions have them:
// invoke_agent at the root, then per step a chat span and its execute_tool spans.
//
// node receive_node_agent.cjs PROTOCOL URL STEPS_JSON   (PROTOCOL: http | grpc; STEPS_JSON: a
// list of steps, each a list of [tool, arguments, result]). Modules from NODE_PATH.
"use strict";
const { trace } = require("@opentelemetry/api");
const { NodeTracerProvider } = require("@opentelemetry/sdk-trace-node");
const { BatchSpanProcessor } = require("@opentelemetry/sdk-trace-base");

const [protocol, url, stepsJson] = process.argv.slice(2);
const { OTLPTraceExporter } =
  protocol === "grpc"
    ? require("@opentelemetry/exporter-trace-otlp-grpc")
    : require("@opentelemetry/exporter-trace-otlp-proto");
// One batch, sent at the end: one request, its spans in the order they ended.
const processor = new BatchSpanProcessor(new OTLPTraceExporter({ url }), {
  maxExportBatchSize: 4096,
  maxQueueSize: 4096,
  scheduledDelayMillis: 600000,
});
const provider = new NodeTracerProvider({ spanProcessors: [processor] });
provider.register();
const tracer = trace.getTracer("node-agent");

async function main() {
  const steps = JSON.parse(stepsJson);
  await tracer.startActiveSpan(
    "invoke_agent coder",
    { attributes: { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder" } },
    async (root) => {
      for (const calls of steps) {
        tracer
          .startSpan("chat m", {
            attributes: {
              "gen_ai.operation.name": "chat",
              "gen_ai.request.model": "m",
              "gen_ai.usage.input_tokens": 100,
              "gen_ai.usage.output_tokens": 10,
            },
          })
          .end();
        for (const [tool, args, result] of calls) {
          const span = tracer.startSpan(`execute_tool ${tool}`, {
            attributes: {
              "gen_ai.operation.name": "execute_tool",
              "gen_ai.tool.name": tool,
              "gen_ai.tool.call.arguments": args,
            },
          });
          span.setAttribute("gen_ai.tool.call.result", result);
          span.end();
        }
      }
      root.end();
    },
  );
  await provider.forceFlush();
  await provider.shutdown();
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
