//! The server through a real client: ADBC's Flight SQL driver from Python
//! (`adbc-driver-flightsql`), running `tests/adbc_client.py` against a server on 127.0.0.1:0.
//!
//! Python is `$SILT_PYTHON`, else the project's venv (`$SILT_VENV`, default
//! `~/.cache/silt-venv`, made by scripts/pyenv.sh), else `python3`. Without the driver the test
//! is skipped with a message, except under `CI=true`, where it fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Server, BIG_BATCHES, BIG_ROWS};
use serde_json::Value;

const TOKEN: &str = "adbc-s3cret";

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("SILT_PYTHON") {
        return p.into();
    }
    let venv = std::env::var_os("SILT_VENV")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/silt-venv")));
    if let Some(py) = venv.map(|v| v.join("bin/python")).filter(|p| p.exists()) {
        return py;
    }
    "python3".into()
}

/// Whether the driver can be imported; panics under CI when it cannot.
fn driver_available(py: &Path) -> bool {
    let ok = Command::new(py)
        .args([
            "-c",
            "import adbc_driver_flightsql.dbapi, adbc_driver_manager",
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        let msg = format!(
            "adbc-driver-flightsql is not importable with {}: install it with \
             `{} -m pip install adbc-driver-flightsql adbc-driver-manager`",
            py.display(),
            py.display()
        );
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED adbc test: {msg}");
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adbc_python_client() {
    let py = python();
    if !driver_available(&py) {
        return;
    }
    let server = Server::start(Some(TOKEN)).await;
    let uri = format!("grpc://{}", server.addr);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/adbc_client.py");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(&py)
            .arg(script)
            .arg(uri)
            .arg(TOKEN)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "adbc_client.py failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let v: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}\n{stderr}"));

    eprintln!("adbc_client.py answered: {v:#}");

    // The statement query: every type and every null as the engine made them.
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{v:#}");
    assert_eq!(rows[0]["id"], 1);
    assert_eq!(rows[0]["name"], "alpha");
    assert_eq!(rows[0]["ts"]["iso"], "2023-11-14T22:13:20+00:00");
    assert_eq!(rows[0]["ts"]["tz"], "UTC");
    assert_eq!(rows[0]["attrs"]["k"], "host");
    assert_eq!(rows[0]["attrs"]["v"], 7);
    assert_eq!(rows[0]["score"], 0.5);
    assert_eq!(rows[1]["id"], 2);
    assert!(rows[1]["name"].is_null());
    assert!(rows[1]["attrs"].is_null());
    assert!(rows[1]["score"].is_null());
    assert_eq!(rows[1]["ts"]["iso"], "2023-11-14T22:13:21.500000+00:00");
    assert_eq!(rows[2]["name"], "gamma");
    assert_eq!(rows[2]["attrs"]["v"], 443);
    assert_eq!(rows[2]["ts"]["iso"], "2023-11-14T22:13:23+00:00");
    let schema: Vec<&str> = v["schema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(
        schema,
        [
            "id: int64",
            "name: string",
            "ts: timestamp[us, tz=UTC]",
            "attrs: struct<k: string, v: int32>",
            "score: double"
        ]
    );

    // The prepared statement, the large result.
    assert_eq!(v["prepared_ids"], serde_json::json!([1, 2, 3]));
    let n = (BIG_BATCHES * BIG_ROWS) as u64;
    assert_eq!(v["big_rows"], n);
    assert_eq!(v["big_sum"], n * (n - 1) / 2);

    // Metadata.
    assert_eq!(v["vendor_name"], "silt");
    assert_eq!(v["vendor_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["table_schema"][2], "ts: timestamp[us, tz=UTC]");
    assert_eq!(
        v["tables"],
        serde_json::json!(["silt.audit.logins", "silt.lake.big", "silt.lake.events"])
    );
    assert_eq!(v["table_types"], serde_json::json!(["TABLE"]));

    // Errors.
    let error = v["error"].as_str().unwrap();
    assert!(error.contains("table not found"), "{error}");
    assert!(error.to_lowercase().contains("invalid"), "{error}");
    let write_error = v["write_error"].as_str().unwrap();
    assert!(
        write_error.contains("queries are read-only"),
        "{write_error}"
    );
    assert_eq!(v["basic_auth_ids"], serde_json::json!([1, 2, 3]));
    let wrong = v["wrong_token_error"].as_str().unwrap();
    assert!(wrong.to_lowercase().contains("unauthenticated"), "{wrong}");
    assert!(wrong.contains("wrong token"), "{wrong}");

    server.stop().await.unwrap();
}
