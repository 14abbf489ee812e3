#pragma once
/* The keys of the wire protocol, each spelled once: the frames, every
 * method's params, the results, the events, the tasks.json record and the
 * daemon's own files that use the same words (the launch request file), and
 * `taskferry doctor`'s object. Code reads and writes a key as PK_<key>
 * (PK_taskId is the NUL-terminated "taskId"), never as a string literal
 * (tests/structure/check keys); a new key is one row here.
 *
 * A key is listed once, in the group where it first appears; the groups
 * say where a key belongs, not every place it is used. The keys of other
 * formats that only look like these (the agent CLIs' NDJSON, the shim's
 * launch spec and exit.json, config.json, the job files) are not here:
 * those files keep their own spellings. */

#define PROTOCOL_KEYS(X)                                                        \
        /* the frames: request, response, error, event, shutdown */             \
        X(version) X(id) X(method) X(params) X(ok) X(result) X(error)           \
        X(code) X(message) X(help) X(detail) X(type) X(subscriptionId)          \
        X(event) X(reason)                                                      \
        /* the params (src/shared/protocol-params.c's tables) */                \
        X(prompt) X(directory) X(model) X(variant) X(sessionId) X(env)          \
        X(finalMarker) X(originSessionId) X(noSandbox) X(noOverlay)             \
        X(allowedDirs) X(rwBind) X(roBind) X(executor) X(class)                 \
        X(parentTaskId) X(diskMax) X(memoryMax) X(tasksMax) X(job) X(taskId)    \
        X(graceMs) X(timeoutMs) X(tailChars) X(full) X(fields) X(force)         \
        X(maxWords) X(mode) X(all) X(summaries) X(chars) X(path)                \
        X(maxOutputFileBytes) X(allowConfig) X(network) X(allowHosts)           \
        X(allowSockets)                                                         \
        /* the tasks.json record and TaskSummary (core/task.h's TASK_FIELDS) */ \
        X(logPath) X(role) X(status) X(executorId) X(pid) X(startedAt)          \
        X(endedAt) X(exitCode) X(signal) X(promptPreview) X(promptTotalChars)   \
        X(spawnError) X(cancelRequested) X(internal) X(failureReason)           \
        X(failureDetail) X(incomplete) X(finalStatus) X(changesetStatus)        \
        X(diffPath) X(overlayDirs) X(preDispatchHead) X(changesetError)         \
        X(checkStatus) X(checkCommand) X(checkExitCode) X(checkOutputTail)      \
        X(checkStartedAt) X(checkEndedAt) X(checkOverride)                      \
        X(projectConfigWarning) X(checkGatePid) X(outputDir) X(dispatchedBy)    \
        X(shimPid) X(diskMaxBytes) X(changesetWarnings) X(headDriftFrom)        \
        X(headDriftTo) X(headDriftRecovered) X(acceptStartedAt) X(summaryOf)    \
        X(unit) X(changesetRisks) X(networkWarning)                             \
        /* overlayDirs {root, upperDir, workDir, tmpRoot, rwBinds[],            \
         * rwFileBinds[], seededFrom}, an rwBinds entry {path, upperDir,        \
         * workDir, stage, worktree} */                                         \
        X(root) X(upperDir) X(workDir) X(tmpRoot) X(rwBinds) X(rwFileBinds)     \
        X(stage) X(worktree) X(seededFrom)                                      \
        /* summaryOf, and task.summary's report */                              \
        X(sourceStatus) X(capturedAt) X(sourceTaskId) X(sourceLogBytes)         \
        X(summaryInputBytes) X(summaryTask) X(summary)                          \
        /* the results: system.health, dispatch, cancel, status, wait */        \
        X(healthy) X(next) X(warnings) X(note) X(logBytesWritten)               \
        X(logLastWriteAt) X(logHasEvent) X(timedOut) X(outputTail)              \
        X(outputTailTotalChars) X(outputTailTruncated)                          \
        /* list and context: counts by status; a queued task's place */         \
        X(counts) X(tasks) X(queued) X(running) X(done) X(crashed)              \
        X(cancelled) X(unknown) X(queuePosition) X(queueProvider)               \
        X(queuedReason) X(cooldownUntil)                                        \
        /* result, tail, output, accept/reject */                               \
        X(diff) X(diffStat) X(files) X(additions) X(deletions) X(tokens)        \
        X(cost) X(narration) X(narrationTotalChars) X(narrationTruncated)       \
        X(text) X(textTotalChars) X(truncated) X(file) X(content) X(size)       \
        X(bytes) X(total) X(applied) X(cleanupFailed)                           \
        /* task.advisor's answer (snake_case on the wire) */                    \
        X(task_id) X(session_id) X(session_reset) X(previous_session_id)        \
        /* task.stats, its cooldowns and the scope's resource limits */         \
        X(byModel) X(dispatches) X(doneRate) X(crashRate)                       \
        X(dominantFailureReason) X(failureReasons) X(count) X(unknownBacklog)   \
        X(computedAt) X(statusMix) X(overall) X(last24h) X(last7d) X(other)     \
        X(trend) X(window) X(current) X(previous) X(settled) X(direction)       \
        X(cooldowns) X(provider) X(until) X(remainingMs) X(resourceLimits)      \
        X(stateJournal)                                                         \
        X(enforced) X(slice) X(memoryHigh) X(cpuWeight) X(limits)               \
        /* the events: task.state, task.activity */                             \
        X(sequence) X(previousStatus) X(occurredAt) X(activity)                 \
        X(outputWatermark) X(includeSummary) X(summaryFailed) X(summaryError)   \
        X(activityVariants)                                                     \
        /* the launch request file {launch: {...}, env} */                      \
        X(launch) X(summarySessionId)                                           \
        /* taskferry doctor */                                                  \
        X(cliVersion) X(protocolVersion) X(integrations) X(claude)              \
        X(playwrightMcpIsolation) X(opencode) X(claudeCode) X(checked)          \
        X(isolated) X(installed)

#define _PROTOCOL_KEY_DECL(k) extern const char PK_##k[];
PROTOCOL_KEYS(_PROTOCOL_KEY_DECL)
#undef _PROTOCOL_KEY_DECL
