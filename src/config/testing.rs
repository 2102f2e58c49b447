//! Test fixtures built from the settings (tests of the rooms above config).

use std::sync::Arc;

use crate::engine::Engine;

/// The engine `phase1` builds with its defaults (the CPU engine).
pub fn phase1_engine() -> Arc<dyn Engine> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let settings = super::resolve(
        &super::split_args(["phase1".to_string()])
            .expect("no flags")
            .0,
        &super::Env::from_pairs(std::iter::empty::<(String, String)>()),
    )
    .expect("defaults")
    .settings;
    settings
        .build_engine(root)
        .unwrap_or_else(|e| panic!("the default engine: {e}"))
}
