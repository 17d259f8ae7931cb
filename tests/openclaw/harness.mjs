// Drives the real OpenClaw loop detection on recorded call sequences, as its tool admission
// does, and writes every call's verdict as JSON.
//
//   node harness.mjs OPENCLAW_PACKAGE_DIR INPUT.json OUTPUT.json
//
// INPUT: {"scenarios": [[step, ...], ...]}; a step is a call {"tool", "args", "result"?,
// "error"?}, {"compaction": true}, or {"batch": [call, ...]} (the calls of one model response).
// OUTPUT: {"version", "results": [[verdict, ...], ...]}: one verdict per call (a batch gives one
// per call in it), {"level", "detector", "blocked", "emitted", "aborted"}. A scenario's verdicts
// stop at the call that finds the run aborted (the post-compaction guard fired on the call
// before it).
//
// OpenClaw's own code does the work (openclaw.mjs loads it). Per call, as the before-tool-call
// hook does: admit (a critical blocks the call, which then records a loop veto as its outcome);
// an admitted call runs and its outcome is recorded; each outcome with a result hash is
// observed by the guard, as the embedded runner does. The level and detector of a verdict come from detectToolCallLoop
// (pure) on the state the admission saw.

import fs from "node:fs";

import { loadOpenClaw, loopDetection, ranWith, VETO } from "./openclaw.mjs";

const [packageDir, inputPath, outputPath] = process.argv.slice(2);
const { version, runtime, normalizeToolPolicyName, admission, createPostCompactionLoopGuard } =
    await loadOpenClaw(packageDir);

let sessions = 0;

async function runScenario(steps) {
    const session = `harness-${sessions++}`;
    const ctx = { sessionKey: session, sessionId: session, loopDetection };
    const state = runtime.getDiagnosticSessionState({ sessionKey: session, sessionId: session });
    const guard = createPostCompactionLoopGuard({ enabled: true });
    const verdicts = [];
    let aborted = false;
    let abortCount = 0;
    let index = 0;

    const outcome = (call, id, result, error) => {
        const record = runtime.recordToolCallOutcome(state, { toolName: normalizeToolPolicyName(call.tool),
            toolParams: call.args, toolCallId: id, result, error, config: loopDetection });
        if (record?.resultHash) {
            const fired = guard.observe({ toolName: record.toolName, argsHash: record.argsHash,
                resultHash: record.resultHash });
            if (fired.shouldAbort && !aborted) {
                aborted = true;
                abortCount = fired.count;
            }
        }
    };
    const detected = (call) => runtime.detectToolCallLoop(state, normalizeToolPolicyName(call.tool),
        call.args, loopDetection, undefined);
    const verdictOf = (found) => ({ level: found.stuck ? found.level : "ok",
        detector: found.stuck ? found.detector : null, count: found.stuck ? found.count : 0,
        blocked: false, emitted: false, aborted: false });

    for (const step of steps) {
        if (step.compaction) {
            guard.armPostCompaction();
            continue;
        }
        if (aborted) {
            verdicts.push({ level: "critical", detector: "compaction_loop_persisted",
                count: abortCount, blocked: true, emitted: true, aborted: true });
            break;
        }
        if (step.batch) {
            const calls = step.batch.map((call) => ({ call, id: `call-${index++}` }));
            // Each call's detector verdict on the history as the batch projects it: the calls
            // before it as loop vetoes (admitToolCallBatch's projectLoopVeto).
            const projected = { ...state, toolCallHistory: [...(state.toolCallHistory ?? [])] };
            const found = calls.map(({ call, id }) => {
                const verdict = runtime.detectToolCallLoop(projected,
                    normalizeToolPolicyName(call.tool), call.args, loopDetection, undefined);
                const scratch = { toolCallHistory: [] };
                runtime.recordToolCall(scratch, normalizeToolPolicyName(call.tool), call.args, id,
                    loopDetection, undefined);
                scratch.toolCallHistory[0].outcomeKind = "tool-loop-veto";
                projected.toolCallHistory.push(scratch.toolCallHistory[0]);
                return verdict;
            });
            const admitted = await admission.admitToolCallBatch(calls.map(({ call, id }) => ({
                toolCall: { name: call.tool, id }, args: call.args })), ctx);
            if (admitted.intervention) {
                // The whole batch is blocked and runs nothing; the admission recorded the vetoes.
                for (let i = 0; i < calls.length; i += 1) {
                    verdicts.push({ level: "critical", detector: admitted.intervention.detector,
                        count: admitted.intervention.count, blocked: true, emitted: i === 0,
                        aborted: false });
                }
                continue;
            }
            const warned = new Set(admitted.warnings.map((w) => w.toolCallId));
            admitted.commitReadyCalls(calls.map(({ call, id }) => ({ toolCallId: id, args: call.args })));
            calls.forEach(({ call, id }, i) => {
                verdicts.push({ ...verdictOf(found[i]), emitted: warned.has(id) });
                outcome(call, id, ...ranWith(call));
            });
            continue;
        }
        const id = `call-${index++}`;
        const verdict = verdictOf(detected(step));
        const intervention = await admission.admitSingleToolCallLoop(
            { toolName: step.tool, params: step.args, toolCallId: id }, ctx);
        verdict.blocked = intervention?.kind === "critical-tool-loop";
        verdict.emitted = intervention !== undefined;
        verdicts.push(verdict);
        if (verdict.blocked) outcome(step, id, VETO(intervention.reason), undefined);
        else outcome(step, id, ...ranWith(step));
    }
    return verdicts;
}

const input = JSON.parse(fs.readFileSync(inputPath, "utf8"));
const results = [];
for (const steps of input.scenarios) results.push(await runScenario(steps));
fs.writeFileSync(outputPath, JSON.stringify({ version, results }));
