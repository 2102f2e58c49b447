//! Minimal HTTP checks used while a stack starts.

use std::time::Duration;

use crate::rt;

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_default()
}

/// Instance ids listed by the frontend's `/health`.
pub fn health_instance_ids(base: &str) -> Result<Vec<u64>, String> {
    rt::block_on(async {
        let body: serde_json::Value = client()
            .get(format!("{base}/health"))
            .send()
            .await
            .map_err(|e| format!("GET /health: {e}"))?
            .json()
            .await
            .map_err(|e| format!("GET /health: not JSON: {e}"))?;
        Ok(body
            .get("instances")
            .and_then(|i| i.as_array())
            .map(|list| {
                list.iter()
                    .filter_map(|i| i.get("instance_id")?.as_u64())
                    .collect()
            })
            .unwrap_or_default())
    })
}

/// One short completion pinned to `instance_id`; `Ok` on HTTP 200 with choices.
pub fn completion(base: &str, model: &str, instance_id: u64) -> Result<(), String> {
    rt::block_on(async {
        let body = serde_json::json!({
            "model": model, "prompt": "kvcr-e2e readiness probe", "max_tokens": 2, "temperature": 0.0,
        });
        let response = client()
            .post(format!("{base}/v1/completions"))
            .header("x-dynamo-worker-instance-id", instance_id.to_string())
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("POST /v1/completions: {e}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if status.is_success() && text.contains("\"choices\"") {
            Ok(())
        } else {
            Err(format!(
                "HTTP {status}: {}",
                text.chars().take(200).collect::<String>()
            ))
        }
    })
}
