// Drives the real OpenClaw loop detection on recorded call sequences, as its single-call
// admission does, and writes every call's verdict as JSON.
//
//   node harness.mjs OPENCLAW_PACKAGE_DIR INPUT.json OUTPUT.json
//
// INPUT: {"scenarios": [[step, ...], ...]}; a step is {"tool", "args", "result"?, "error"?} or
// {"compaction": true}. OUTPUT: {"version", "results": [[verdict, ...], ...]}, one verdict per
// call step: {"level", "detector", "blocked", "emitted", "aborted"}. A scenario's verdicts stop
// at the call that finds the run aborted (the post-compaction guard fired on the call before).
//
// Per call, as agent-tools.before-tool-call does (admitSingleToolCallLoop, then the outcome):
// detect; a critical blocks the call and records a loop veto as its outcome; otherwise record
// the call, then its outcome. A warning is emitted when its rate limit lets it through
// (shouldEmitLoopWarning, copied below: the module does not export it). The post-compaction
// guard is OpenClaw's own code, cut from the dist file that holds it (it is not exported
// either), and observes each outcome that has a result hash, as the embedded runner does.

import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, inputPath, outputPath] = process.argv.slice(2);
const dist = path.join(packageDir, "dist");
const files = fs.readdirSync(dist);

const detectionFile = files.find((name) => /^tool-loop-detection-[A-Za-z0-9_-]+\.mjs$/.test(name)
    && !name.startsWith("tool-loop-detection-config"));
const detection = await import(pathToFileURL(path.join(dist, detectionFile)).href);
const detectToolCallLoop = detection.t;
const recordToolCall = detection.r;
const recordToolCallOutcome = detection.i;

const GUARD_REGION = "//#region src/agents/embedded-agent-runner/post-compaction-loop-guard.ts";
function loadGuardFactory() {
    for (const name of files) {
        if (!name.endsWith(".mjs")) continue;
        const text = fs.readFileSync(path.join(dist, name), "utf8");
        const start = text.indexOf(GUARD_REGION);
        if (start < 0) continue;
        const end = text.indexOf("//#endregion", start);
        const body = text.slice(start, end)
            .replace(/const log = createSubsystemLogger\([^)]*\);/, "const log = quiet;");
        const quiet = { info() {}, warn() {}, error() {}, debug() {} };
        return new Function("quiet", `${body}\nreturn createPostCompactionLoopGuard;`)(quiet);
    }
    throw new Error("post-compaction guard not found in " + dist);
}
const createPostCompactionLoopGuard = loadGuardFactory();

// agent-tools.before-tool-call: shouldEmitLoopWarning (LOOP_WARNING_BUCKET_SIZE = 10).
function shouldEmitLoopWarning(state, warningKey, count) {
    if (!state.toolLoopWarningBuckets) state.toolLoopWarningBuckets = new Map();
    const bucket = Math.floor(count / 10);
    if (bucket <= (state.toolLoopWarningBuckets.get(warningKey) ?? 0)) return false;
    state.toolLoopWarningBuckets.set(warningKey, bucket);
    return true;
}

const config = { enabled: true };

function runScenario(steps) {
    const state = {};
    const guard = createPostCompactionLoopGuard({ enabled: true });
    const verdicts = [];
    let aborted = false;
    let index = 0;
    for (const step of steps) {
        if (step.compaction) {
            guard.armPostCompaction();
            continue;
        }
        if (aborted) {
            verdicts.push({ level: "critical", detector: "compaction_loop_persisted",
                blocked: true, emitted: true, aborted: true });
            break;
        }
        const toolCallId = `call-${index++}`;
        const result = detectToolCallLoop(state, step.tool, step.args, config, undefined);
        const verdict = { level: "ok", detector: null, blocked: false, emitted: false,
            aborted: false };
        let outcome;
        if (result.stuck) {
            verdict.level = result.level;
            verdict.detector = result.detector;
            verdict.blocked = result.level === "critical";
            verdict.emitted = verdict.blocked
                || shouldEmitLoopWarning(state, result.warningKey ?? `${result.detector}:${step.tool}`,
                    result.count);
        }
        if (verdict.blocked) {
            outcome = recordToolCallOutcome(state, {
                toolName: step.tool, toolParams: step.args, toolCallId,
                result: { content: [{ type: "text", text: result.message }],
                    details: { status: "blocked", deniedReason: "tool-loop" } },
            });
        } else {
            recordToolCall(state, step.tool, step.args, toolCallId, config, undefined);
            outcome = recordToolCallOutcome(state, {
                toolName: step.tool, toolParams: step.args, toolCallId,
                result: step.result === null ? undefined : step.result,
                error: step.error === null ? undefined : step.error,
            });
        }
        verdicts.push(verdict);
        if (outcome?.resultHash) {
            const fired = guard.observe({ toolName: outcome.toolName, argsHash: outcome.argsHash,
                resultHash: outcome.resultHash });
            aborted = fired.shouldAbort;
        }
    }
    return verdicts;
}

const input = JSON.parse(fs.readFileSync(inputPath, "utf8"));
const version = JSON.parse(fs.readFileSync(path.join(packageDir, "package.json"), "utf8")).version;
fs.writeFileSync(outputPath, JSON.stringify({ version, results: input.scenarios.map(runScenario) }));
