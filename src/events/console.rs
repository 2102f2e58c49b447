//! The console writer: each event as the line(s) a user reads on stderr
//! while the run goes on, and one line of text for every event (what JUnit
//! and the report's timeline show).

use super::kinds::{ClockKind, Moment, RunEvent, Unwritten};

/// The prefix of the harness's own lines.
const PREFIX: &str = "[kvcr-e2e] ";

/// The text the console prints for `event`, or `None` for an event it does
/// not print (a trial's start and end are libtest's to print).
pub fn line(event: &RunEvent) -> Option<String> {
    use RunEvent::*;
    let said = match event {
        Warning { message } => format!("warning: {message}"),
        EvidenceDir { path } => format!("evidence: {}", path.display()),
        SetupStep { message, .. } => message.clone(),
        GpuTelemetryOff { message } => return Some(message.clone()),
        StackStarting { engine, logs } => {
            format!("starting the {engine} stack (logs: {})", logs.display())
        }
        StackAttached {
            manifest,
            through_urls,
        } => format!(
            "attached to the stack of {}{} (no provisioning, no teardown)",
            manifest.display(),
            match through_urls {
                true => " through its URLs (it runs in another PID namespace)",
                false => "",
            }
        ),
        WorkerRestarted { reason, .. } => reason.clone(),
        KvcrChecked { build, processes } => {
            format!("{build} ({processes} KVCR processes checked)")
        }
        StackReady { total_ms, .. } => {
            format!("stack ready in {:.1} s", *total_ms as f64 / 1000.0)
        }
        StackKept { manifest } => format!(
            "stack left running (keep_stack); attach with --attach {}",
            manifest.display()
        ),
        ReferenceFromCache { path } => {
            format!("reference tokens from cache {}", path.display())
        }
        ReferencePhase { prompts } => {
            format!("reference phase: {prompts} prompts on the KVCR-disabled engine")
        }
        ReferenceWithoutExtended {
            tokens,
            example,
            max_prompt,
        } => format!(
            "reference phase: no extended prompts ({tokens} tokens, e.g. {example}; the engine takes at most {max_prompt}): a case that needs one fails for want of its reference"
        ),
        ReferenceBatching {
            concurrency,
            reason,
        } => format!(
            "reference phase: {concurrency} famil{} in flight ({reason})",
            if *concurrency == 1 { "y" } else { "ies" }
        ),
        ReferenceWorkload {
            trace,
            requests,
            rate,
        } => format!(
            "reference phase: workload {} ({requests} requests) at rate ×{rate} on the KVCR-off reference worker",
            trace.display()
        ),
        DeterminismProbes { engine } => {
            format!("determinism probes on the bare engine ({engine})")
        }
        ExclusiveWaiting { timeout_s, runs } => {
            let mut text = format!(
                "--exclusive: waiting (up to {timeout_s} s, exclusive_timeout_s) for {} other live run{} to end:",
                runs.len(),
                if runs.len() == 1 { "" } else { "s" }
            );
            for run in runs {
                text.push_str(&format!("\n{PREFIX}  {run}"));
            }
            text
        }
        ExclusiveWaited { seconds } => {
            format!("--exclusive: waited {seconds:.1} s for the other live runs")
        }
        NeighbourSeen {
            when, relation, run, ..
        } => match when {
            Moment::Start => format!("beside {relation}: {run}"),
            Moment::End => format!("at the end, beside {relation}: {run}"),
        },
        MachineLoad { load } => format!("{load} at start"),
        DisturbsExclusive { pid, target } => format!(
            "warning: pid {pid} ({target}) runs --exclusive; this run disturbs it and its figures"
        ),
        MachineShared { others } => format!(
            "{others} other live run{} share{} this machine: timings and load-sensitive cases may suffer (--exclusive waits for them)",
            if *others == 1 { "" } else { "s" },
            if *others == 1 { "s" } else { "" }
        ),
        MachineClock {
            kind,
            seconds,
            seen_at,
        } => clock_sentence(*kind, *seconds, seen_at),
        SignalReceived { signal } => {
            return Some(format!(
                "\n{PREFIX}{signal} received: tearing the stack down"
            ))
        }
        TrialStarted { .. } | TrialFinished { .. } | SetupFailed { .. } | Restore { .. } => {
            return None
        }
        Retry { trial, why, .. } => format!("{trial} runs again: its {why}"),
        NotWholeBefore { trial, found } => format!("before {trial}: {found}"),
        NoRestore { trial } => {
            format!("no restore after {trial}: no later trial of this run uses the stack")
        }
        WorkerReplaced { reason, .. } => format!("{reason}; replacing it"),
        StillStopping {
            trial,
            doing,
            waited_s,
            now,
        } => format!(
            "{trial} timed out while {doing}; waiting {waited_s} s so far for it to stop (now: {now})"
        ),
        EvidenceNotWritten { what, error } => match what {
            Unwritten::StackManifest => format!("cannot write stack.json: {error}"),
            Unwritten::ResultsAfterTrial => {
                format!("could not write results after a trial: {error}")
            }
            Unwritten::Evidence => format!("could not write all evidence: {error}"),
        },
        EvidenceWritten { path, junit } => format!(
            "evidence: {} (junit: {})",
            path.display(),
            junit.display()
        ),
        ChildRun { what, command } => format!("{what}: {command}"),
        NoReplayRecorded { log } => format!(
            "workload: the run recorded no replay; its log: {}",
            log.display()
        ),
        PeerRun { peer, phase } => return Some(format!("[client-peers] {peer} / {phase} ...")),
        SideBySideReplay {
            client,
            requests,
            rate,
        } => {
            return Some(format!(
                "[side-by-side] {client} replays {requests} requests at rate ×{rate} ..."
            ))
        }
    };
    Some(format!("{PREFIX}{said}"))
}

/// Prints `event`'s line(s) to stderr, if the console prints it.
pub fn print(event: &super::Event) {
    if let Some(line) = line(&event.kind) {
        eprintln!("{line}");
    }
}

/// One line of text for any event, for the writers that list events (JUnit,
/// the report): the console's words without its prefix, or, for an event
/// the console does not print, a sentence of its own.
pub fn text(event: &RunEvent) -> String {
    if let Some(line) = line(event) {
        return line
            .trim_start_matches('\n')
            .lines()
            .map(|l| l.strip_prefix(PREFIX).unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n");
    }
    match event {
        RunEvent::TrialStarted { trial } => format!("{trial} started"),
        RunEvent::TrialFinished {
            trial,
            outcome,
            duration_ms,
            detail,
        } => {
            let mut text = format!(
                "{trial} {} in {:.1} s",
                outcome.label(),
                *duration_ms as f64 / 1000.0
            );
            if let Some(detail) = detail {
                text.push_str(&format!(": {detail}"));
            }
            text
        }
        RunEvent::SetupFailed { trial, error } => format!(
            "setup failed (shown in full by {trial}): {}",
            error.lines().next().unwrap_or_default()
        ),
        RunEvent::Restore { trial } => format!("restoring the stack after {trial}"),
        other => format!("{other:?}"),
    }
}

/// What the machine's clocks did, as a sentence (also the clock watcher's
/// words for the records).
pub fn clock_sentence(kind: ClockKind, seconds: f64, seen_at: &str) -> String {
    match kind {
        ClockKind::WallClockStep => {
            format!("the machine's wall clock stepped {seconds:+.1} s (seen at {seen_at})")
        }
        ClockKind::Stall => format!(
            "the machine did not run the harness for {seconds:.1} s (a stalled or paused machine; seen at {seen_at})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{ComponentReady, SetupPart, TrialOutcome};

    /// Every kind the console prints, with the words users have read so far.
    fn printed() -> Vec<(RunEvent, &'static str)> {
        use RunEvent::*;
        vec![
            (Warning { message: "stack_ready_nice is ignored on this engine".into() },
             "[kvcr-e2e] warning: stack_ready_nice is ignored on this engine"),
            (EvidenceDir { path: "target/phase1/runs/phase1/r1".into() },
             "[kvcr-e2e] evidence: target/phase1/runs/phase1/r1"),
            (SetupStep { part: SetupPart::PythonEnv, message: "step 1/4: python -m venv".into() },
             "[kvcr-e2e] step 1/4: python -m venv"),
            (GpuTelemetryOff { message: "GPU telemetry off: no driver".into() },
             "GPU telemetry off: no driver"),
            (StackStarting { engine: "cpu".into(), logs: "runs/r1/logs".into() },
             "[kvcr-e2e] starting the cpu stack (logs: runs/r1/logs)"),
            (StackAttached { manifest: "s/stack.json".into(), through_urls: false },
             "[kvcr-e2e] attached to the stack of s/stack.json (no provisioning, no teardown)"),
            (StackAttached { manifest: "s/stack.json".into(), through_urls: true },
             "[kvcr-e2e] attached to the stack of s/stack.json through its URLs (it runs in another PID namespace) (no provisioning, no teardown)"),
            (WorkerRestarted { worker: "worker-A".into(), reason: "worker-A: served, but no deposit after 30 s; restarted once (log: a.log)".into() },
             "[kvcr-e2e] worker-A: served, but no deposit after 30 s; restarted once (log: a.log)"),
            (KvcrChecked { build: "kvcr 0.1.1 (pypi)".into(), processes: 3 },
             "[kvcr-e2e] kvcr 0.1.1 (pypi) (3 KVCR processes checked)"),
            (StackReady { total_ms: 6_949, components: vec![ComponentReady { component: "worker-A".into(), ready_ms: 4_100 }], restarts: Vec::new() },
             "[kvcr-e2e] stack ready in 6.9 s"),
            (StackKept { manifest: "r1/stack.json".into() },
             "[kvcr-e2e] stack left running (keep_stack); attach with --attach r1/stack.json"),
            (ReferenceFromCache { path: "cache/ab.json".into() },
             "[kvcr-e2e] reference tokens from cache cache/ab.json"),
            (ReferencePhase { prompts: 24 },
             "[kvcr-e2e] reference phase: 24 prompts on the KVCR-disabled engine"),
            (ReferenceWithoutExtended { tokens: 300, example: "f001x".into(), max_prompt: 256 },
             "[kvcr-e2e] reference phase: no extended prompts (300 tokens, e.g. f001x; the engine takes at most 256): a case that needs one fails for want of its reference"),
            (ReferenceBatching { concurrency: 1, reason: "batching changes tokens".into() },
             "[kvcr-e2e] reference phase: 1 family in flight (batching changes tokens)"),
            (ReferenceBatching { concurrency: 4, reason: "same tokens batched".into() },
             "[kvcr-e2e] reference phase: 4 families in flight (same tokens batched)"),
            (ReferenceWorkload { trace: "t.jsonl".into(), requests: 200, rate: 3.0 },
             "[kvcr-e2e] reference phase: workload t.jsonl (200 requests) at rate ×3 on the KVCR-off reference worker"),
            (DeterminismProbes { engine: "bare-engine".into() },
             "[kvcr-e2e] determinism probes on the bare engine (bare-engine)"),
            (ExclusiveWaiting { timeout_s: 600, runs: vec!["pid 1 phase1".into()] },
             "[kvcr-e2e] --exclusive: waiting (up to 600 s, exclusive_timeout_s) for 1 other live run to end:\n[kvcr-e2e]   pid 1 phase1"),
            (ExclusiveWaiting { timeout_s: 60, runs: vec!["pid 1 a".into(), "pid 2 b".into()] },
             "[kvcr-e2e] --exclusive: waiting (up to 60 s, exclusive_timeout_s) for 2 other live runs to end:\n[kvcr-e2e]   pid 1 a\n[kvcr-e2e]   pid 2 b"),
            (ExclusiveWaited { seconds: 12.34 },
             "[kvcr-e2e] --exclusive: waited 12.3 s for the other live runs"),
            (NeighbourSeen { when: Moment::Start, relation: "another live run".into(), pid: 7, target: "phase1".into(), run: "pid 7 phase1".into() },
             "[kvcr-e2e] beside another live run: pid 7 phase1"),
            (NeighbourSeen { when: Moment::End, relation: "another live run".into(), pid: 7, target: "phase1".into(), run: "pid 7 phase1".into() },
             "[kvcr-e2e] at the end, beside another live run: pid 7 phase1"),
            (MachineLoad { load: "load 0.52 0.40 0.33".into() },
             "[kvcr-e2e] load 0.52 0.40 0.33 at start"),
            (DisturbsExclusive { pid: 7, target: "phase1".into() },
             "[kvcr-e2e] warning: pid 7 (phase1) runs --exclusive; this run disturbs it and its figures"),
            (MachineShared { others: 1 },
             "[kvcr-e2e] 1 other live run shares this machine: timings and load-sensitive cases may suffer (--exclusive waits for them)"),
            (MachineShared { others: 2 },
             "[kvcr-e2e] 2 other live runs share this machine: timings and load-sensitive cases may suffer (--exclusive waits for them)"),
            (MachineClock { kind: ClockKind::WallClockStep, seconds: 40.0, seen_at: "2026-12-03T05:53:30Z".into() },
             "[kvcr-e2e] the machine's wall clock stepped +40.0 s (seen at 2026-12-03T05:53:30Z)"),
            (MachineClock { kind: ClockKind::Stall, seconds: 6.25, seen_at: "2026-12-03T05:53:30Z".into() },
             "[kvcr-e2e] the machine did not run the harness for 6.2 s (a stalled or paused machine; seen at 2026-12-03T05:53:30Z)"),
            (SignalReceived { signal: "SIGINT".into() },
             "\n[kvcr-e2e] SIGINT received: tearing the stack down"),
            (Retry { trial: "TC-01::generation_correctness".into(), attempt: 2, why: "attempt failed while the machine stalled: no answer".into() },
             "[kvcr-e2e] TC-01::generation_correctness runs again: its attempt failed while the machine stalled: no answer"),
            (NotWholeBefore { trial: "TC-02::local_dram_flow".into(), found: "worker A dropped out".into() },
             "[kvcr-e2e] before TC-02::local_dram_flow: worker A dropped out"),
            (NoRestore { trial: "TC-06::guard_recovery_timing".into() },
             "[kvcr-e2e] no restore after TC-06::guard_recovery_timing: no later trial of this run uses the stack"),
            (WorkerReplaced { worker: "B".into(), reason: "worker B latched its KVCR source off".into() },
             "[kvcr-e2e] worker B latched its KVCR source off; replacing it"),
            (StillStopping { trial: "TC-04::x".into(), doing: "killing worker A".into(), waited_s: 30, now: "waiting for the router".into() },
             "[kvcr-e2e] TC-04::x timed out while killing worker A; waiting 30 s so far for it to stop (now: waiting for the router)"),
            (EvidenceNotWritten { what: Unwritten::StackManifest, error: "disk full".into() },
             "[kvcr-e2e] cannot write stack.json: disk full"),
            (EvidenceNotWritten { what: Unwritten::ResultsAfterTrial, error: "disk full".into() },
             "[kvcr-e2e] could not write results after a trial: disk full"),
            (EvidenceNotWritten { what: Unwritten::Evidence, error: "disk full".into() },
             "[kvcr-e2e] could not write all evidence: disk full"),
            (EvidenceWritten { path: "runs/r1".into(), junit: "runs/r1/junit.xml".into() },
             "[kvcr-e2e] evidence: runs/r1 (junit: runs/r1/junit.xml)"),
            (ChildRun { what: "workload".into(), command: "cargo test --test workload".into() },
             "[kvcr-e2e] workload: cargo test --test workload"),
            (NoReplayRecorded { log: "out/child.log".into() },
             "[kvcr-e2e] workload: the run recorded no replay; its log: out/child.log"),
            (PeerRun { peer: "aiperf".into(), phase: "warm".into() },
             "[client-peers] aiperf / warm ..."),
            (SideBySideReplay { client: "ours".into(), requests: 200, rate: 1.5 },
             "[side-by-side] ours replays 200 requests at rate ×1.5 ..."),
        ]
    }

    #[test]
    fn the_console_prints_each_kind_in_the_words_users_know() {
        for (event, expected) in printed() {
            assert_eq!(line(&event).as_deref(), Some(expected), "{event:?}");
        }
    }

    #[test]
    fn the_console_leaves_trials_to_libtest() {
        let silent = [
            RunEvent::TrialStarted { trial: "a".into() },
            RunEvent::TrialFinished {
                trial: "a".into(),
                outcome: TrialOutcome::Failed,
                duration_ms: 1_500,
                detail: Some("no hit".into()),
            },
            RunEvent::SetupFailed {
                trial: "a".into(),
                error: "stack provisioning failed: x\nmore".into(),
            },
            RunEvent::Restore { trial: "a".into() },
        ];
        for event in &silent {
            assert_eq!(line(event), None, "{event:?}");
        }
        let texts: Vec<String> = silent.iter().map(text).collect();
        assert_eq!(
            texts,
            [
                "a started",
                "a FAILED in 1.5 s: no hit",
                "setup failed (shown in full by a): stack provisioning failed: x",
                "restoring the stack after a",
            ]
        );
    }

    #[test]
    fn an_events_text_is_its_console_line_without_the_prefix() {
        assert_eq!(
            text(&RunEvent::SignalReceived {
                signal: "SIGTERM".into()
            }),
            "SIGTERM received: tearing the stack down"
        );
        assert_eq!(
            text(&RunEvent::ExclusiveWaiting {
                timeout_s: 5,
                runs: vec!["pid 1 a".into()]
            }),
            "--exclusive: waiting (up to 5 s, exclusive_timeout_s) for 1 other live run to end:\n  pid 1 a"
        );
        assert_eq!(
            text(&RunEvent::PeerRun {
                peer: "aiperf".into(),
                phase: "warm".into()
            }),
            "[client-peers] aiperf / warm ..."
        );
    }
}
