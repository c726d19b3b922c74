//! Peak memory of one Send: how far the resident set of the runtime's
//! workerd processes rises above where it stood before the request
//! (`/proc/PID/status` VmHWM after resetting it through `clear_refs`),
//! for a Send of 1 MiB bodies up to the 32 MiB request cap and one of
//! 10,000 empty messages, each on a warmed Worker. The isolate has 128 MB;
//! docs/bench.md says where a Send's memory goes.

use std::time::Duration;

use mqlite_e2e::{b64, full_send, memory_of, reset_peak_memory};
use serde_json::json;

/// One Send measured: the request's size and the peak growth.
struct Measured {
    request: usize,
    growth: u64,
}

/// Measures both Sends on the runtime at `base`, whose workerd processes
/// `pids` lists, and prints one row each.
pub fn print_peak_per_send(
    name: &str,
    base: &str,
    token: &str,
    pids: &dyn Fn() -> Vec<u32>,
) -> Result<(), String> {
    let post = |path: &str, body: &[u8]| -> Result<(), String> {
        let reply = ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(120))
            .build()
            .post(&format!("{base}/mqlite.v1.{path}"))
            .set("Authorization", &format!("Bearer {token}"))
            .send_bytes(body);
        match reply {
            Ok(_) => Ok(()),
            Err(e) => Err(format!("{name}: {path}: {e}")),
        }
    };
    let json_post = |path: &str, body: serde_json::Value| post(path, body.to_string().as_bytes());
    for queue in ["mem-big", "mem-empty", "mem-warm"] {
        json_post(
            "AdminService/CreateQueue",
            json!({"name":queue,"config":{}}),
        )?;
    }
    // Warm-up through the same paths: the isolate compiles them once.
    json_post(
        "QueueService/Send",
        json!({"queue":"mem-warm","messages":[{"body":b64("warm")}]}),
    )?;
    json_post(
        "QueueService/Send",
        json!({"queue":"mem-warm","messages":vec![json!({}); 1_000]}),
    )?;
    let measure = |payload: &[u8]| -> Result<Measured, String> {
        std::thread::sleep(Duration::from_millis(500));
        let pids = pids();
        reset_peak_memory(&pids).map_err(|e| format!("{name}: {e}"))?;
        let before = memory_of(&pids).rss_bytes;
        post("QueueService/Send", payload)?;
        let peak = memory_of(&pids).peak_bytes;
        Ok(Measured {
            request: payload.len(),
            growth: peak.saturating_sub(before),
        })
    };
    let (big, bodies) = full_send("mem-big");
    let count = bodies.len();
    let empty = format!(
        r#"{{"queue":"mem-empty","messages":[{}]}}"#,
        vec!["{}"; 10_000].join(",")
    );
    for (what, measured) in [
        (format!("{count} x 1 MiB bodies"), measure(big.as_bytes())?),
        (
            "10,000 empty messages".to_owned(),
            measure(empty.as_bytes())?,
        ),
    ] {
        println!(
            "{name:<15} {what:<24} {:>13} {:>13} {:>8.2}x",
            size(measured.request as u64),
            size(measured.growth),
            measured.growth as f64 / measured.request as f64
        );
    }
    Ok(())
}

/// Prints the table's header.
pub fn print_header() {
    println!("\nPeak memory of one Send (growth of the workerd processes' resident set above its level before the request)");
    println!(
        "{:<15} {:<24} {:>13} {:>13} {:>9}",
        "runtime", "payload", "request", "growth", "ratio"
    );
}

const MIB: usize = 1 << 20;

/// Bytes in MiB, or KiB below one MiB.
fn size(bytes: u64) -> String {
    if bytes >= MIB as u64 {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}
