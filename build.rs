//! Merges the OpenAPI fragments under `openapi/` into the one document the
//! Worker serves at `/openapi.json`, at build time: `base.json` (info,
//! servers, security, shared components, the fixed routes) plus one fragment
//! per dialect, each `{"paths": {…}, "components": {…}}`. A path or a
//! component defined twice fails the build instead of one silently winning.

use std::path::Path;

use serde_json::{Map, Value};

/// The dialect fragments, merged into `base.json` in this order.
const FRAGMENTS: &[&str] = &["connect.json", "pgmq.json"];

fn main() {
    let dir = Path::new("openapi");
    println!("cargo:rerun-if-changed=openapi/base.json");
    for name in FRAGMENTS {
        println!("cargo:rerun-if-changed=openapi/{name}");
    }
    let document = match merge(dir) {
        Ok(document) => document,
        Err(e) => {
            eprintln!("openapi: {e}");
            std::process::exit(1);
        }
    };
    let out = std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into());
    let etag = format!("\"{:016x}\"", fnv1a(document.as_bytes()));
    for (name, text) in [("openapi.json", document.as_str()), ("openapi.etag", &etag)] {
        if let Err(e) = std::fs::write(Path::new(&out).join(name), text) {
            eprintln!("openapi: cannot write {name}: {e}");
            std::process::exit(1);
        }
    }
}

/// FNV-1a, 64 bits: the document's entity tag (a change detector, not a
/// security boundary), so a client revalidates with `If-None-Match`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn read(path: &Path) -> Result<Map<String, Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(format!("{}: not a JSON object", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

fn merge(dir: &Path) -> Result<String, String> {
    let mut base = read(&dir.join("base.json"))?;
    for name in FRAGMENTS {
        let fragment = read(&dir.join(name))?;
        for (key, value) in fragment {
            let Value::Object(entries) = value else {
                return Err(format!("{name}: `{key}` is not an object"));
            };
            match key.as_str() {
                "paths" => add_all(&mut base, "paths", entries, name)?,
                "components" => {
                    for (section, members) in entries {
                        let Value::Object(members) = members else {
                            return Err(format!("{name}: components.{section} is not an object"));
                        };
                        let components = base
                            .entry("components")
                            .or_insert_with(|| Value::Object(Map::new()));
                        let Value::Object(components) = components else {
                            return Err("base.json: components is not an object".into());
                        };
                        add_all(components, &section, members, name)?;
                    }
                }
                other => return Err(format!("{name}: unexpected member `{other}`")),
            }
        }
    }
    serde_json::to_string(&Value::Object(base)).map_err(|e| e.to_string())
}

/// Adds `entries` to the object `parent[key]`, refusing a name it already has.
fn add_all(
    parent: &mut Map<String, Value>,
    key: &str,
    entries: Map<String, Value>,
    fragment: &str,
) -> Result<(), String> {
    let target = parent
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(target) = target else {
        return Err(format!("base.json: `{key}` is not an object"));
    };
    for (name, value) in entries {
        if target.contains_key(&name) {
            return Err(format!("{fragment}: {key} `{name}` is already defined"));
        }
        target.insert(name, value);
    }
    Ok(())
}
