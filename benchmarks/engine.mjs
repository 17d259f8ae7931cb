// The CPU time OpenClaw's real loop detection spends per tool call, for benchmarks/engine.py.
//
//   node --expose-gc engine.mjs OPENCLAW_PACKAGE_DIR INPUT.json
//
// INPUT is the conformance harness's ({"scenarios": [[step, ...], ...]}), parsed once before
// any timing. Prints one JSON line when loaded ({"version", "calls"}), then for each line read
// on stdin runs every scenario once (a round) and prints {"cpu_us", "calls", "blocked",
// "warned", "aborted"}: the process's CPU time (process.cpuUsage, user + system) of the round
// alone; sessions are cleared and garbage collected between rounds, outside the timing.
//
// Per call, what OpenClaw does (tests/openclaw/harness.mjs, without the harness's extra
// detectToolCallLoop that reads each verdict out): the admission (detection, the warning rate
// limit, recording the call), the outcome recorded, the post-compaction guard observing it.

import fs from "node:fs";
import readline from "node:readline";

import { loadOpenClaw, loopDetection, ranWith, VETO } from "../tests/openclaw/openclaw.mjs";

const [packageDir, inputPath] = process.argv.slice(2);
const { version, runtime, normalizeToolPolicyName, admission, createPostCompactionLoopGuard,
    resetSessionStates } = await loadOpenClaw(packageDir);
const scenarios = JSON.parse(fs.readFileSync(inputPath, "utf8")).scenarios;

let rounds = 0;

async function runScenario(steps, session, totals) {
    const ctx = { sessionKey: session, sessionId: session, loopDetection };
    const state = runtime.getDiagnosticSessionState({ sessionKey: session, sessionId: session });
    const guard = createPostCompactionLoopGuard({ enabled: true });
    let aborted = false;
    let index = 0;

    const outcome = (call, id, result, error) => {
        const record = runtime.recordToolCallOutcome(state, {
            toolName: normalizeToolPolicyName(call.tool), toolParams: call.args, toolCallId: id,
            result, error, config: loopDetection });
        if (record?.resultHash) {
            const fired = guard.observe({ toolName: record.toolName, argsHash: record.argsHash,
                resultHash: record.resultHash });
            if (fired.shouldAbort) aborted = true;
        }
    };

    for (const step of steps) {
        if (step.compaction) {
            guard.armPostCompaction();
            continue;
        }
        if (aborted) {
            totals.calls += 1;
            totals.aborted += 1;
            break;
        }
        if (step.batch) {
            const calls = step.batch.map((call) => ({ call, id: `call-${index++}` }));
            totals.calls += calls.length;
            const admitted = await admission.admitToolCallBatch(calls.map(({ call, id }) => ({
                toolCall: { name: call.tool, id }, args: call.args })), ctx);
            if (admitted.intervention) {
                totals.blocked += calls.length;
                continue;
            }
            totals.warned += admitted.warnings.length;
            admitted.commitReadyCalls(calls.map(({ call, id }) => ({ toolCallId: id, args: call.args })));
            for (const { call, id } of calls) outcome(call, id, ...ranWith(call));
            continue;
        }
        const id = `call-${index++}`;
        totals.calls += 1;
        const intervention = await admission.admitSingleToolCallLoop(
            { toolName: step.tool, params: step.args, toolCallId: id }, ctx);
        if (intervention?.kind === "critical-tool-loop") {
            totals.blocked += 1;
            outcome(step, id, VETO(intervention.reason), undefined);
        } else {
            if (intervention !== undefined) totals.warned += 1;
            outcome(step, id, ...ranWith(step));
        }
    }
}

async function round() {
    resetSessionStates();
    globalThis.gc?.();
    const totals = { calls: 0, blocked: 0, warned: 0, aborted: 0 };
    const prefix = `bench-${rounds++}-`;
    const start = process.cpuUsage();
    for (let i = 0; i < scenarios.length; i += 1) await runScenario(scenarios[i], prefix + i, totals);
    const spent = process.cpuUsage(start);
    return { cpu_us: spent.user + spent.system, ...totals };
}

const count = (steps) => steps.reduce((n, s) => n + (s.compaction ? 0 : s.batch ? s.batch.length : 1), 0);
console.log(JSON.stringify({ version, calls: scenarios.reduce((n, s) => n + count(s), 0) }));
for await (const line of readline.createInterface({ input: process.stdin })) {
    if (line.trim() === "") continue;
    console.log(JSON.stringify(await round()));
}
