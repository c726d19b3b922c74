//! The built Worker under plain `workerd serve` — no `wrangler dev` proxy in
//! front — for benchmarks closer to the production runtime and for `make
//! serve`. Writes a capnp config embedding copies of `build/index.js` (ES
//! module) and `build/index_bg.wasm` (wasm module), with `wrangler.toml`'s
//! compatibility date and `[vars]` plus `MQLITE_DB`, `MQLITE_TOKENS` and
//! any extra variables as text bindings, the `QueueWaker` Durable Object
//! namespace bound as `MQLITE_WAKER` (wake hints and group commit, objects
//! kept in memory), `build/assets` as the `ASSETS` binding (a disk service:
//! the console's files and the OpenAPI document), and outbound network to
//! loopback allowed. Killed on drop.
//!
//! Several processes may share their queue objects ([`Objects`]): one
//! hosts them and the others reach them over HTTP on a Unix socket in the
//! host's private directory (it runs statements with the Worker's database
//! credentials, so only this user may reach it), so each queue has one
//! object for all of them, as on Cloudflare (a Durable Object is one
//! instance wherever the Workers calling it run).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Worker of a process whose objects live in another (`Objects::Remote`).
const FRONT_JS: &str = include_str!("front.js");
/// What serves a process's objects to the others (`Objects::Host`).
const OBJECTS_JS: &str = include_str!("objects.js");
/// The host's socket, in its private directory.
const OBJECTS_SOCKET: &str = "objects.sock";

/// Where a process's queue objects (the `MQLITE_WAKER` namespace) live.
#[derive(Clone, Debug, PartialEq)]
pub enum Objects {
    /// In the process, for it alone.
    Own,
    /// In the process, also served to other processes on the Unix socket
    /// [`Workerd::objects_socket`] names (objects.js).
    Host,
    /// In the process hosting them, reached on this Unix socket (front.js).
    Remote(PathBuf),
}

pub struct Workerd {
    child: Child,
    dir: PathBuf,
    objects_socket: Option<PathBuf>,
    pub base: String,
}

impl Workerd {
    /// Serves `<root>/build` with `workerd` on a free loopback port.
    pub fn start(
        workerd: &Path,
        root: &Path,
        db_url: &str,
        token: &str,
    ) -> Result<Workerd, String> {
        Self::start_with(workerd, root, db_url, token, &[], None)
    }

    /// [`Workerd::start`] with `extra` variables (they win over
    /// `wrangler.toml`'s), on `port` (a free one when `None`).
    pub fn start_with(
        workerd: &Path,
        root: &Path,
        db_url: &str,
        token: &str,
        extra: &[(String, String)],
        port: Option<u16>,
    ) -> Result<Workerd, String> {
        Self::start_sharing(workerd, root, db_url, token, extra, port, Objects::Own)
    }

    /// [`Workerd::start_with`] with its queue objects where `objects` says.
    pub fn start_sharing(
        workerd: &Path,
        root: &Path,
        db_url: &str,
        token: &str,
        extra: &[(String, String)],
        port: Option<u16>,
        objects: Objects,
    ) -> Result<Workerd, String> {
        let manifest = std::fs::read_to_string(root.join("wrangler.toml"))
            .map_err(|e| format!("wrangler.toml: {e}"))?;
        let date = toml_string(&manifest, "", "compatibility_date")
            .ok_or("wrangler.toml has no compatibility_date")?;
        let mut vars: Vec<(String, String)> = table_strings(&manifest, "vars");
        vars.push(("MQLITE_DB".into(), db_url.into()));
        vars.push(("MQLITE_TOKENS".into(), token.into()));
        for (k, v) in extra {
            vars.retain(|(name, _)| name != k);
            vars.push((k.clone(), v.clone()));
        }
        let port = port.unwrap_or_else(crate::free_port);
        let dir =
            std::env::temp_dir().join(format!("mqlite-workerd-{}-{port}", std::process::id()));
        let host_socket = dir.join(OBJECTS_SOCKET);
        let build = root.join("build");
        let mut bindings: Vec<String> = vars
            .iter()
            .map(|(k, v)| format!("(name = {k:?}, text = {v:?})"))
            .collect();
        bindings.push(r#"(name = "ASSETS", service = "assets")"#.into());
        let waker = r#"(name = "MQLITE_WAKER", durableObjectNamespace = "QueueWaker")"#;
        let namespaces = r#"
  durableObjectNamespaces = [(className = "QueueWaker", uniqueKey = "mqlite-queue-waker", enableSql = true)],
  durableObjectStorage = (inMemory = void),"#;
        // What the layout adds: a main module before index.js, services
        // and sockets; a process without objects declares none.
        let (mut front, mut services, mut sockets) = ("", String::new(), String::new());
        let mut namespaces = namespaces;
        match &objects {
            Objects::Own => bindings.push(waker.into()),
            Objects::Host => {
                bindings.push(waker.into());
                services = r#"
    (name = "objects", worker = (
      modules = [(name = "objects.js", esModule = embed "objects.js")],
      compatibilityDate = "DATE",
      bindings = [(name = "MQLITE_WAKER", durableObjectNamespace = (className = "QueueWaker", serviceName = "main"))],
    )),"#
                    .replace("DATE", &date);
                let at = format!("unix:{}", host_socket.display());
                sockets = format!(
                    r#"(name = "objects", address = {at:?}, http = (), service = "objects"),"#
                );
            }
            Objects::Remote(socket) => {
                namespaces = "";
                front = r#"
    (name = "front.js", esModule = embed "front.js"),"#;
                bindings.push(r#"(name = "MQLITE_OBJECTS", service = "objects")"#.into());
                let at = format!("unix:{}", socket.display());
                services = format!(
                    r#"
    (name = "objects", external = (address = {at:?}, http = ())),"#
                );
            }
        }
        let assets = build.join("assets");
        let assets = assets
            .canonicalize()
            .map_err(|e| format!("{}: {e}", assets.display()))?;
        let config = format!(
            r#"using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    (name = "net", network = (allow = ["public", "private", "local"])),
    (name = "assets", disk = (path = {assets:?}, writable = false)),{services}
  ],
  sockets = [{sockets}(name = "http", address = "127.0.0.1:{port}", http = (), service = "main")],
);
const worker :Workerd.Worker = (
  modules = [{front}
    (name = "index.js", esModule = embed "index.js"),
    (name = "index_bg.wasm", wasm = embed "index_bg.wasm"),
  ],
  compatibilityDate = {date:?},
  bindings = [{bindings}],{namespaces}
  globalOutbound = "net",
);
"#,
            bindings = bindings.join(", "),
            assets = assets.display().to_string(),
        );
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // The config holds the secrets: only its owner may read it.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        // workerd embeds files relative to the config: copies sit beside it.
        for module in ["index.js", "index_bg.wasm"] {
            std::fs::copy(build.join(module), dir.join(module))
                .map_err(|e| format!("{}: {e}", build.join(module).display()))?;
        }
        for (name, text) in [("front.js", FRONT_JS), ("objects.js", OBJECTS_JS)] {
            std::fs::write(dir.join(name), text).map_err(|e| format!("{name}: {e}"))?;
        }
        let config_path = dir.join("mqlite.capnp");
        std::fs::write(&config_path, config).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.join("workerd.log")).map_err(|e| e.to_string())?;
        let child = Command::new(workerd)
            .arg("serve")
            .arg(&config_path)
            .arg("--experimental")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", workerd.display()))?;
        let objects_socket = (objects == Objects::Host).then_some(host_socket);
        let mut served = Workerd {
            child,
            dir,
            objects_socket,
            base: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while ureq::get(&format!("{}/healthz", served.base))
            .call()
            .is_err()
        {
            if Instant::now() > deadline || matches!(served.child.try_wait(), Ok(Some(_))) {
                let log =
                    std::fs::read_to_string(served.dir.join("workerd.log")).unwrap_or_default();
                return Err(format!("workerd did not serve /healthz:\n{log}"));
            }
            // Fine-grained: `mqlite-module` times a cold start by this loop.
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(served)
    }

    /// The Unix socket an [`Objects::Host`] process serves its objects on.
    pub fn objects_socket(&self) -> Option<&Path> {
        self.objects_socket.as_deref()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has exited.
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Workerd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `key = "value"` in `[table]` (`""`: before any table) of a flat TOML file.
fn toml_string(text: &str, table: &str, key: &str) -> Option<String> {
    table_strings(text, table)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

/// The `key = "string"` entries of one table of a flat TOML file (the only
/// shape `wrangler.toml` uses for what the benchmark needs).
fn table_strings(text: &str, table: &str) -> Vec<(String, String)> {
    let mut current = String::new();
    let mut out = vec![];
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.trim().to_owned();
        } else if current == table {
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            let v = v.trim();
            if let Some(v) = v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
                out.push((k.trim().to_owned(), v.to_owned()));
            }
        }
    }
    out
}
