// Loads OpenClaw's real loop detection from an installed package, for the conformance harness
// (harness.mjs) and the engine benchmark (benchmarks/engine.mjs).
//
// Its admission functions (admitSingleToolCallLoop, admitToolCallBatch and the warning rate
// limit, shouldEmitLoopWarning) and its post-compaction guard are not exported, and the modules
// that hold them need a newer Node for unrelated reasons, so their source regions are cut from
// the dist files and run against OpenClaw's real runtime surface
// (agent-tools.before-tool-call.runtime: the detector, the history, the session state).

import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

export const quiet = { info() {}, warn() {}, error() {}, debug() {} };
export const loopDetection = { enabled: true };
// A step's result and error as OpenClaw's outcome recording takes them (undefined, not null).
export const ranWith = (call) => [call.result === null ? undefined : call.result,
    call.error === null ? undefined : call.error];
export const VETO = (message) => ({ content: [{ type: "text", text: message }],
    details: { status: "blocked", deniedReason: "tool-loop" } });

export async function loadOpenClaw(packageDir) {
    const dist = path.join(packageDir, "dist");
    const files = fs.readdirSync(dist).filter((name) => name.endsWith(".mjs"));
    const read = (name) => fs.readFileSync(path.join(dist, name), "utf8");
    const load = (name) => import(pathToFileURL(path.join(dist, name)).href);
    const fileWith = (marker) => {
        const name = files.find((file) => read(file).includes(marker));
        if (!name) throw new Error(`${marker} not found in ${dist}`);
        return name;
    };
    const region = (text, marker) => {
        const start = text.indexOf(marker);
        return text.slice(start, text.indexOf("//#endregion", start));
    };
    const named = (pattern) => files.find((name) => pattern.test(name));
    const exported = async (pattern, name) =>
        Object.values(await load(named(pattern))).find((f) => f.name === name);

    const runtimeFile = named(/^agent-tools\.before-tool-call\.runtime-.+\.mjs$/);
    const { beforeToolCallRuntime: runtime } = await load(runtimeFile);
    const normalizeToolPolicyName = await exported(/^tool-policy-shared-.+\.mjs$/,
        "normalizeToolPolicyName");
    const pruneMapToMaxSize = await exported(/^map-size-.+\.mjs$/, "pruneMapToMaxSize");
    const resetSessionStates = await exported(/^diagnostic-session-state-.+\.mjs$/,
        "resetDiagnosticSessionStateForTest");

    const hookFile = fileWith("//#region src/agents/tool-loop-admission.ts");
    const hookText = read(hookFile);
    const rateLimit = hookText.match(
        /const LOOP_WARNING_BUCKET_SIZE = \d+;\nconst MAX_LOOP_WARNING_KEYS = \d+;/)[0];
    const shouldEmit = hookText.match(/function shouldEmitLoopWarning\([\s\S]*?\n}\n/)[0];
    const admission = new Function(
        "normalizeToolPolicyName", "loadBeforeToolCallRuntime", "beforeToolCallLog", "hashToolCall",
        "pruneMapToMaxSize", "recordBatchAdmittedToolCall", "releaseBatchAdmittedToolCalls",
        `${rateLimit}\n${shouldEmit}\n${region(hookText, "//#region src/agents/tool-loop-admission.ts")}
        return { admitSingleToolCallLoop, admitToolCallBatch };`,
    )(normalizeToolPolicyName, async () => runtime, quiet, runtime.hashToolCall ?? (await load(
        files.find((name) => /^tool-loop-detection-[A-Za-z0-9_-]+\.mjs$/.test(name)
            && !name.startsWith("tool-loop-detection-config")))).n,
        pruneMapToMaxSize, () => {}, () => {});

    const guardMarker = "//#region src/agents/embedded-agent-runner/post-compaction-loop-guard.ts";
    const guardBody = region(read(fileWith(guardMarker)), guardMarker)
        .replace(/const log = createSubsystemLogger\([^)]*\);/, "const log = quiet;");
    const createPostCompactionLoopGuard = new Function(
        "quiet", `${guardBody}\nreturn createPostCompactionLoopGuard;`)(quiet);

    const version = JSON.parse(fs.readFileSync(path.join(packageDir, "package.json"), "utf8")).version;
    return { version, runtime, normalizeToolPolicyName, admission, createPostCompactionLoopGuard,
        resetSessionStates };
}
