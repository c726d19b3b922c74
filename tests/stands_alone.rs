//! The repository stands alone: no file points at the specification folder
//! beside the clone, only `.ci/run` may pick optional tools from there, and
//! comments cite the repository's own `docs/` rather than the spec's
//! section numbers. The patterns are assembled with `concat!`, so this file
//! holds none of them and is checked like every other.

use std::path::{Path, PathBuf};

/// Build output, caches and VCS data: not the repository's content.
const SKIP_DIRS: &[&str] = &[
    "target",
    "build",
    ".git",
    ".wrangler",
    "node_modules",
    "data",
];

/// The one file allowed to name the folder beside the clone (CI's optional
/// tools).
const ALLOWED: &str = ".ci/run";

const FORBIDDEN: &[&str] = &[
    concat!("..", "/", "shared"),
    concat!("/work", "/", "shared"),
    concat!("wire", " §"),
    concat!("semantics", " §"),
    concat!("decisions", ".md"),
];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if !SKIP_DIRS.contains(&name.to_string_lossy().as_ref()) {
                files(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

#[test]
fn nothing_but_ci_refers_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    files(root, &mut all);
    assert!(all.len() > 100, "walked only {} files", all.len());
    let mut offending = Vec::new();
    for path in all {
        if path == root.join(ALLOWED) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue; // binary
        };
        for (n, line) in text.lines().enumerate() {
            if FORBIDDEN.iter().any(|f| line.contains(f)) {
                offending.push(format!("{}:{}: {line}", path.display(), n + 1));
            }
        }
    }
    assert!(offending.is_empty(), "{}", offending.join("\n"));
}
