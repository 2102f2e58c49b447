//! The bytes of one KV block as vLLM lays it out for a local model, checked
//! against the profile's `block_bytes`.
//!
//! Every byte figure of a vLLM run (KVCR's deposit and deliver counters
//! against blocks, the Guard pools, `cpu_bytes_to_use` in blocks) is read
//! through `block_bytes`; a profile whose `dtype` changes without it would
//! fail every byte verdict for a reason that is not KVCR's. For a local
//! model directory the figure is known before anything starts:
//! layers × (K, V) × KV heads × head dim × dtype bytes × block tokens.
//! A hub id has no local config, and is not checked.

use std::path::Path;

use serde_json::Value;

/// Bytes per element of vLLM's `--dtype` (its KV cache follows the model
/// dtype unless `--kv-cache-dtype` says otherwise; the plan never sets it).
/// `None`/`auto` is the model's own `dtype` (`torch_dtype` in older configs).
fn dtype_bytes(dtype: Option<&str>, config: &Value) -> Result<u64, String> {
    let named = match dtype {
        None | Some("auto") => config
            .get("dtype")
            .or_else(|| config.get("torch_dtype"))
            .and_then(Value::as_str)
            .ok_or("the model's config.json names no dtype, and the profile none")?,
        Some(d) => d,
    };
    match named {
        "float32" | "float" => Ok(4),
        "bfloat16" | "float16" | "half" => Ok(2),
        other => Err(format!("dtype {other:?} has no known element size")),
    }
}

fn field(config: &Value, key: &str) -> Result<u64, String> {
    config
        .get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("config.json has no integer {key}"))
}

/// Bytes of one `block_size`-token KV block of the model whose
/// `config.json` is `config`, in `dtype`, on one tensor-parallel rank.
pub fn block_bytes(
    config: &Value,
    dtype: Option<&str>,
    block_size: u32,
    tensor_parallel: u32,
) -> Result<u64, String> {
    let layers = field(config, "num_hidden_layers")?;
    let heads = field(config, "num_attention_heads")?;
    let kv_heads = field(config, "num_key_value_heads").unwrap_or(heads);
    let head_dim = match field(config, "head_dim") {
        Ok(d) => d,
        Err(_) => field(config, "hidden_size")? / heads.max(1),
    };
    let kv_heads_per_rank = (kv_heads / u64::from(tensor_parallel.max(1))).max(1);
    Ok(layers
        * 2
        * kv_heads_per_rank
        * head_dim
        * dtype_bytes(dtype, config)?
        * u64::from(block_size))
}

/// `Err` when `model` is a local directory whose layout in `dtype` does not
/// give `profile_block_bytes`; `Ok` for a hub id or a matching profile.
pub fn check_block_bytes(
    model_dir: &Path,
    dtype: Option<&str>,
    block_size: u32,
    tensor_parallel: u32,
    profile_block_bytes: u64,
) -> Result<(), String> {
    let config_path = model_dir.join("config.json");
    if !config_path.is_file() {
        return Ok(());
    }
    let text = std::fs::read_to_string(&config_path)
        .map_err(|e| format!("{}: {e}", config_path.display()))?;
    let config: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", config_path.display()))?;
    let want = block_bytes(&config, dtype, block_size, tensor_parallel)
        .map_err(|e| format!("{}: {e}", config_path.display()))?;
    if want != profile_block_bytes {
        return Err(format!(
            "block_bytes = {profile_block_bytes} in the profile, but {} in dtype {} lays out \
             {want} bytes per {block_size}-token block (layers x 2 x KV heads x head dim x dtype \
             bytes x tokens); every byte verdict reads block_bytes",
            model_dir.display(),
            dtype.unwrap_or("auto")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tiny() -> Value {
        json!({"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
               "head_dim": 64, "hidden_size": 256, "dtype": "bfloat16"})
    }

    #[test]
    fn float32_doubles_a_bf16_block() {
        assert_eq!(block_bytes(&tiny(), Some("bfloat16"), 64, 1), Ok(65536));
        assert_eq!(block_bytes(&tiny(), Some("float32"), 64, 1), Ok(131072));
        assert_eq!(block_bytes(&tiny(), None, 64, 1), Ok(65536), "auto: config");
    }

    #[test]
    fn head_dim_falls_back_to_hidden_over_heads_and_ranks_split_kv_heads() {
        let mut c = tiny();
        c.as_object_mut().map(|o| o.remove("head_dim"));
        assert_eq!(block_bytes(&c, Some("bfloat16"), 64, 2), Ok(32768));
    }

    #[test]
    fn an_unknown_dtype_is_an_error_not_a_guess() {
        let err = block_bytes(&tiny(), Some("int4"), 64, 1).unwrap_err();
        assert!(err.contains("int4"), "{err}");
    }

    #[test]
    fn a_profile_whose_dtype_moved_without_its_block_bytes_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("config.json"), tiny().to_string()).expect("config");
        let err = check_block_bytes(dir.path(), Some("float32"), 64, 1, 65536).unwrap_err();
        assert!(
            err.contains("block_bytes = 65536") && err.contains("131072"),
            "{err}"
        );
        assert!(check_block_bytes(dir.path(), Some("float32"), 64, 1, 131072).is_ok());
        assert!(
            check_block_bytes(&dir.path().join("hub-id"), None, 64, 1, 1).is_ok(),
            "no local config: not checked"
        );
    }
}
