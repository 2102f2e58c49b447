//! A toy engine: the smallest room an engine needs, for the registry's
//! test (`engine/testing.rs`). `python -m toy_engine` workers (which do not
//! exist: the plan is only read) behind the Dynamo frontend, without KVCR's
//! Guard, on the aggregated topology only.

use serde::Deserialize;

use crate::proc::ProcessSpec;

use super::needs::{Need, Support};
use super::{
    dynamo, Engine, Geometry, LaunchContext, ReferenceVariant, ServedModel, Setup, Topology,
    WorkerSlot,
};

/// Its fixture, `fixtures/engines/toy.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToyProfile {
    pub model: String,
    pub block_size: u32,
    pub block_bytes: u64,
    pub device_cache_blocks: u64,
    pub prompt_tokens: [u32; 2],
}

pub struct ToyEngine {
    profile: ToyProfile,
    served: ServedModel,
}

impl ToyEngine {
    fn process(&self, ctx: &LaunchContext, name: &str, slot: &WorkerSlot) -> ProcessSpec {
        let spec = ProcessSpec::new(name, &ctx.python, ctx.logs_dir.join(format!("{name}.log")))
            .args(["-m", "toy_engine", "--model", &self.profile.model])
            .args(["--metrics-port", &slot.metrics_port.to_string()]);
        dynamo::apply_env(spec, ctx)
    }
}

impl Engine for ToyEngine {
    fn build(setup: &Setup) -> Result<Self, String> {
        if setup.topology != Topology::Agg {
            return Err(format!(
                "engine toy: topology {} does not apply; use agg",
                setup.topology
            ));
        }
        let profile: ToyProfile = setup.profile()?;
        Ok(Self {
            served: ServedModel::from_profile(&profile.model, None, profile.prompt_tokens),
            profile,
        })
    }

    fn supports(need: Need, topology: Topology) -> Support {
        match need {
            _ if topology != Topology::Agg => Support::no("the toy engine runs on agg only"),
            Need::Topology => Support::Yes,
            _ => Support::no("the toy engine has no KVCR tier"),
        }
    }

    fn name(&self) -> &'static str {
        "toy"
    }

    fn served(&self) -> &ServedModel {
        &self.served
    }

    fn geometry(&self) -> Geometry {
        Geometry::dense(self.profile.block_size, self.profile.block_bytes)
    }

    fn worker(&self, ctx: &LaunchContext, slot: &WorkerSlot) -> ProcessSpec {
        self.process(ctx, &slot.process_name(), slot)
            .args(["--served-model-name", &self.model()])
    }

    fn reference_worker(
        &self,
        ctx: &LaunchContext,
        variant: ReferenceVariant,
        slot: &WorkerSlot,
    ) -> ProcessSpec {
        self.process(ctx, variant.label(), slot)
            .args(["--served-model-name", &self.reference_model(variant)])
    }

    fn token_identity(&self) -> String {
        format!("toy model={}", self.profile.model)
    }

    fn device_cache_blocks(&self) -> u64 {
        self.profile.device_cache_blocks
    }
}
