//! One endpoint over several databases (docs/databases.md): which
//! databases the deployment has, where each name lives, and the engine an
//! RPC runs on.
//!
//! Every name (queue, subscription, topic, pgmq queue) lives in exactly one
//! database, recorded in the catalog's `placements` table (the first
//! database listed) before the name is first created there. A placement
//! never changes, so each isolate keeps what it has read: an RPC on a known
//! name makes exactly one database request, on its own database. A name
//! never created has no placement and is answered by the catalog (which
//! knows no such queue); that answer is not kept, since another isolate may
//! create the name at any time.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use sha2::{Digest, Sha256};

use crate::engine::{redrive_across, Engine, EngineError, KeyCheck, RedriveRequest, Site, Waiter};
use crate::store::{StoreError, Transport};

/// The name of the database when `MQLITE_DATABASES` is not set.
pub const DEFAULT_DATABASE: &str = "main";
/// Longest database name: it is stored beside every placement.
const MAX_NAME_CHARS: usize = 32;

/// One configured database: its name (stored in placements: never rename
/// one) and its URL (`None` in tests that bring their own transports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseSpec {
    pub name: String,
    pub url: Option<String>,
}

impl DatabaseSpec {
    /// The secret holding this database's own auth token; unset, the
    /// shared `MQLITE_DB_AUTH_TOKEN` (a Turso group token) applies.
    pub fn token_var(&self) -> String {
        format!(
            "MQLITE_DB_AUTH_TOKEN_{}",
            self.name.to_ascii_uppercase().replace('-', "_")
        )
    }
}

/// `MQLITE_DATABASES=name=url,name=url,…` (the first is the catalog), or
/// the one database of `MQLITE_DB` named [`DEFAULT_DATABASE`]. Names are
/// 1 to 32 of `a-z 0-9 _ -`, starting with a letter or digit, each once.
pub fn database_specs(var: &impl Fn(&str) -> Option<String>) -> Result<Vec<DatabaseSpec>, String> {
    let Some(list) = var("MQLITE_DATABASES").filter(|v| !v.trim().is_empty()) else {
        return Ok(vec![DatabaseSpec {
            name: DEFAULT_DATABASE.into(),
            url: var("MQLITE_DB").filter(|u| !u.trim().is_empty()),
        }]);
    };
    if var("MQLITE_DB").is_some_and(|u| !u.trim().is_empty()) {
        return Err("set MQLITE_DATABASES or MQLITE_DB, not both".into());
    }
    let mut specs: Vec<DatabaseSpec> = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, url)) = entry.split_once('=') else {
            return Err(format!(
                "MQLITE_DATABASES entries must be name=url (got {entry:?})"
            ));
        };
        let (name, url) = (name.trim(), url.trim());
        if !valid_name(name) {
            return Err(format!(
                "MQLITE_DATABASES: database name {name:?} must be 1 to {MAX_NAME_CHARS} of \
                 a-z, 0-9, '_' and '-', starting with a letter or digit"
            ));
        }
        if url.is_empty() {
            return Err(format!("MQLITE_DATABASES: database {name:?} has no URL"));
        }
        if specs.iter().any(|s| s.name == name) {
            return Err(format!("MQLITE_DATABASES lists database {name:?} twice"));
        }
        specs.push(DatabaseSpec {
            name: name.into(),
            url: Some(url.into()),
        });
    }
    if specs.is_empty() {
        return Err("MQLITE_DATABASES lists no database".into());
    }
    Ok(specs)
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.len() <= MAX_NAME_CHARS
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// Where a new name goes: the database whose hash with the name is
/// highest (rendezvous hashing), so every isolate picks the same one and a
/// database added later takes its share of new names only.
pub fn rendezvous<'a>(names: &'a [String], name: &str) -> &'a str {
    let score = |database: &str| {
        let digest = Sha256::new()
            .chain_update(database.as_bytes())
            .chain_update([0])
            .chain_update(name.as_bytes())
            .finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_be_bytes(first)
    };
    names
        .iter()
        .max_by_key(|database| score(database))
        .map_or(DEFAULT_DATABASE, String::as_str)
}

/// Names whose placement one isolate keeps; past this it starts over (a
/// miss costs one catalog read, never a wrong database).
const MAX_KNOWN_PLACEMENTS: usize = 10_000;

/// The placements an isolate has read: name → database index.
#[derive(Default)]
pub struct Placements {
    known: Mutex<HashMap<String, usize>>,
}

impl Placements {
    fn get(&self, name: &str) -> Option<usize> {
        self.known.lock().ok()?.get(name).copied()
    }

    fn learn(&self, name: &str, index: usize) {
        if let Ok(mut known) = self.known.lock() {
            if known.len() >= MAX_KNOWN_PLACEMENTS {
                known.clear();
            }
            known.insert(name.to_owned(), index);
        }
    }
}

/// The engines of every configured database, in configuration order (the
/// first is the catalog), and the isolate's placements.
pub struct Databases<T> {
    names: Arc<[String]>,
    engines: Vec<Engine<T>>,
    placements: Arc<Placements>,
}

impl<T: Transport> Databases<T> {
    /// `engines` in the order of `names`; at least one.
    pub fn new(names: Arc<[String]>, engines: Vec<Engine<T>>, placements: Arc<Placements>) -> Self {
        Databases {
            names,
            engines,
            placements,
        }
    }

    /// The catalog: placements, managed keys, and every name of a
    /// one-database deployment.
    pub fn catalog(&self) -> &Engine<T> {
        &self.engines[0]
    }

    /// Every database's engine, for views that cover them all.
    pub fn all(&self) -> &[Engine<T>] {
        &self.engines
    }

    /// The configured database names, the catalog first.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The same databases for one request made with a managed key: every
    /// program checks it in the database it runs in.
    pub fn for_key(&self, key: Arc<KeyCheck>) -> Databases<T> {
        Databases {
            names: self.names.clone(),
            engines: self
                .engines
                .iter()
                .map(|e| e.for_key(key.clone()))
                .collect(),
            placements: self.placements.clone(),
        }
    }

    /// The engine of the database `name` lives in: the catalog's when the
    /// name was never created (it answers that no such queue exists).
    pub async fn of(&self, name: &str) -> Result<&Engine<T>, EngineError> {
        Ok(&self.engines[self.index_of(name).await?])
    }

    async fn index_of(&self, name: &str) -> Result<usize, EngineError> {
        if self.engines.len() == 1 {
            return Ok(0);
        }
        if let Some(index) = self.placements.get(name) {
            return Ok(index);
        }
        match self.catalog().placement(name).await? {
            Some(database) => self.learned(name, &database),
            None => Ok(0),
        }
    }

    /// The engine of `name`'s database, placing the name first when it has
    /// no placement yet (pgmq's create).
    pub async fn placing(&self, name: &str) -> Result<&Engine<T>, EngineError> {
        self.placing_in(name, "").await
    }

    /// [`Databases::placing`] for CreateQueue, which may name the database
    /// (`requested`; empty: rendezvous hashing picks). A name that lives in
    /// another database already stays there: `name_conflict`.
    pub async fn placing_in(&self, name: &str, requested: &str) -> Result<&Engine<T>, EngineError> {
        let wanted = match requested {
            "" => None,
            database => Some(self.listed(database)?),
        };
        // An empty name places nothing: the catalog refuses it.
        if self.engines.len() == 1 || name.is_empty() {
            return Ok(self.catalog());
        }
        let index = match self.placements.get(name) {
            Some(index) => index,
            None => {
                let database =
                    wanted.map_or_else(|| rendezvous(&self.names, name), |i| &self.names[i]);
                let placed = self.catalog().place(name, database).await?;
                self.learned(name, &placed)?
            }
        };
        match wanted {
            Some(want) if want != index => Err(EngineError::NameConflict(format!(
                "mqlite: {name:?} lives in database {:?}, not {requested:?}: a name never \
                 moves (docs/databases.md)",
                self.names[index]
            ))),
            _ => Ok(&self.engines[index]),
        }
    }

    /// The index of a database a request names: one `MQLITE_DATABASES` lists.
    fn listed(&self, database: &str) -> Result<usize, EngineError> {
        self.position(database).ok_or_else(|| {
            EngineError::InvalidArgument(format!(
                "mqlite: no database {database:?} (this deployment has {})",
                self.names.join(", ")
            ))
        })
    }

    /// The engine of `topic`'s database, placing the topic (when new) and
    /// the subscription `name` (when new) there: a publish reaches every
    /// subscription in one transaction. A subscription placed elsewhere
    /// before cannot join the topic (`name_conflict`).
    pub async fn placing_beside(&self, name: &str, topic: &str) -> Result<&Engine<T>, EngineError> {
        // Names Subscribe refuses place nothing: the catalog refuses them.
        if self.engines.len() == 1 || name.is_empty() || topic.is_empty() || name == topic {
            return Ok(self.catalog());
        }
        let (topic_database, database) = self
            .catalog()
            .place_beside(name, topic, rendezvous(&self.names, topic))
            .await?;
        let topic_index = self.learned(topic, &topic_database)?;
        let index = self.learned(name, &database)?;
        if index != topic_index {
            return Err(EngineError::NameConflict(format!(
                "mqlite: {name:?} lives in database {:?}, its topic {topic:?} in {:?}: a \
                 subscription lives with its topic",
                self.names[index], self.names[topic_index]
            )));
        }
        Ok(&self.engines[index])
    }

    /// A Redrive: inside the source's database when the target lives
    /// there too (one transaction per chunk), else relayed between the two
    /// databases without losing or copying a message twice
    /// ([`redrive_across`], docs/databases.md).
    pub async fn redrive(
        &self,
        request: &RedriveRequest,
        waiter: &impl Waiter,
    ) -> Result<i64, EngineError> {
        let source = self.index_of(&request.queue).await?;
        let in_place = request.target.is_empty() || request.target == request.queue;
        let target = if in_place {
            source
        } else {
            self.index_of(&request.target).await?
        };
        if source == target {
            return self.engines[source].redrive(request, waiter).await;
        }
        let sites: Vec<Site<'_, T>> = self
            .names
            .iter()
            .zip(&self.engines)
            .map(|(name, engine)| Site { name, engine })
            .collect();
        redrive_across(&sites, source, target, request, waiter).await
    }

    /// Runs `view` on every database at once; the answers in configuration
    /// order, or the first failure.
    pub async fn each<'a, R, F>(
        &'a self,
        view: impl Fn(&'a Engine<T>) -> F,
    ) -> Result<Vec<R>, EngineError>
    where
        F: Future<Output = Result<R, EngineError>> + 'a,
    {
        join(self.engines.iter().map(view).collect())
            .await
            .into_iter()
            .collect()
    }

    /// [`Databases::each`] for views that list: every database's list,
    /// one after the other in configuration order (the caller sorts).
    pub async fn gather<'a, R, F>(
        &'a self,
        view: impl Fn(&'a Engine<T>) -> F,
    ) -> Result<Vec<R>, EngineError>
    where
        F: Future<Output = Result<Vec<R>, EngineError>> + 'a,
    {
        Ok(self.each(view).await?.into_iter().flatten().collect())
    }

    /// Runs `write` on every database but the catalog at once. A failure
    /// leaves the catalog's write done and some copies made: the answer is
    /// `outcome_unknown` (the caller retries, or revokes what it made).
    pub async fn copy_to_others<'a, F>(
        &'a self,
        write: impl Fn(&'a Engine<T>) -> F,
    ) -> Result<(), EngineError>
    where
        F: Future<Output = Result<(), EngineError>> + 'a,
    {
        let copies = join(self.engines.iter().skip(1).map(write).collect()).await;
        for (copy, database) in copies.into_iter().zip(self.names.iter().skip(1)) {
            if let Err(e) = copy {
                return Err(EngineError::Store(StoreError::OutcomeUnknown(format!(
                    "the catalog committed, database {database:?} did not: {e:?}"
                ))));
            }
        }
        Ok(())
    }

    /// Copies `key` from the catalog into every other database, after a
    /// database refused a key the catalog holds valid: that database was
    /// added after the key was minted, or missed its copy (docs/databases.md).
    /// The refused request ran nothing; its retry finds the copy.
    /// A RevokeKey between the catalog's read and the copies finds no copy
    /// to revoke where one is being made, so the catalog is read again
    /// after them, and a key revoked (or gone) by then is revoked in every
    /// copy.
    pub async fn copy_key_everywhere(&self, key: &KeyCheck) -> Result<(), EngineError> {
        let Some(copy) = self.catalog().key_copy(key).await? else {
            return Ok(());
        };
        self.copy_to_others(|e| e.copy_key(&copy)).await?;
        match self.catalog().key_copy(key).await? {
            Some(now) if now.key.revoked_at_ms == 0 => Ok(()),
            _ => self.copy_to_others(|e| e.revoke_copy(&copy.key.id)).await,
        }
    }

    fn learned(&self, name: &str, database: &str) -> Result<usize, EngineError> {
        let index = self.index(database)?;
        self.placements.learn(name, index);
        Ok(index)
    }

    /// The index of a stored database name: `''` is the catalog itself.
    fn index(&self, database: &str) -> Result<usize, EngineError> {
        if database.is_empty() {
            return Ok(0);
        }
        self.position(database).ok_or_else(|| {
            EngineError::Store(StoreError::Unavailable(format!(
                "a name lives in database {database:?}, which MQLITE_DATABASES does not list"
            )))
        })
    }

    /// Where `database` stands in `MQLITE_DATABASES`.
    fn position(&self, database: &str) -> Option<usize> {
        self.names.iter().position(|n| n == database)
    }
}

/// Awaits every future at once, their outputs in order: one per database,
/// a handful (smaller code than a general-purpose join in the Worker).
async fn join<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn one_database_is_the_default() {
        let specs = database_specs(&vars(&[("MQLITE_DB", "libsql://a.example")])).unwrap();
        assert_eq!(
            specs,
            vec![DatabaseSpec {
                name: "main".into(),
                url: Some("libsql://a.example".into())
            }]
        );
        assert_eq!(specs[0].token_var(), "MQLITE_DB_AUTH_TOKEN_MAIN");
    }

    #[test]
    fn a_list_of_databases_keeps_its_order() {
        let specs = database_specs(&vars(&[(
            "MQLITE_DATABASES",
            " cat=libsql://c.example , eu-1=http://127.0.0.1:8081,",
        )]))
        .unwrap();
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["cat", "eu-1"]);
        assert_eq!(specs[1].url.as_deref(), Some("http://127.0.0.1:8081"));
        assert_eq!(specs[1].token_var(), "MQLITE_DB_AUTH_TOKEN_EU_1");
    }

    #[test]
    fn bad_lists_are_configuration_errors() {
        for (list, db) in [
            ("a=libsql://x,a=libsql://y", ""),
            ("a", ""),
            ("A=libsql://x", ""),
            ("-a=libsql://x", ""),
            ("a=", ""),
            (",", ""),
            ("a=libsql://x", "libsql://y"),
            ("abcdefghijklmnopqrstuvwxyz0123456=libsql://x", ""),
            ("aB=libsql://x", ""),
            ("a.b=libsql://x", ""),
            ("a b=libsql://x", ""),
        ] {
            let result = database_specs(&vars(&[("MQLITE_DATABASES", list), ("MQLITE_DB", db)]));
            assert!(result.is_err(), "{list:?} {db:?}: {result:?}");
        }
        let longest = "abcdefghijklmnopqrstuvwxyz012345=libsql://x";
        assert!(database_specs(&vars(&[("MQLITE_DATABASES", longest)])).is_ok());
        let every_kind = "0a_b-9=libsql://x";
        assert!(database_specs(&vars(&[("MQLITE_DATABASES", every_kind)])).is_ok());
    }

    #[test]
    fn join_awaits_every_future_and_keeps_their_order() {
        let futures: Vec<_> = (0..4u64)
            .map(|i| async move {
                // The later ones finish first.
                for _ in 0..(4 - i) {
                    yield_once().await;
                }
                i
            })
            .collect();
        assert_eq!(pollster::block_on(join(futures)), vec![0, 1, 2, 3]);
    }

    /// Pending once, waking itself.
    async fn yield_once() {
        let mut yielded = false;
        std::future::poll_fn(|cx| {
            if yielded {
                Poll::Ready(())
            } else {
                yielded = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        })
        .await
    }

    #[test]
    fn rendezvous_spreads_names_and_keeps_them_when_a_database_is_added() {
        let two: Vec<String> = vec!["a".into(), "b".into()];
        let three: Vec<String> = vec!["a".into(), "b".into(), "c".into()];
        let mut counts = [0usize; 3];
        let mut moved_elsewhere = 0;
        for i in 0..3000 {
            let name = format!("queue-{i}");
            let before = rendezvous(&two, &name);
            let after = rendezvous(&three, &name);
            counts[three.iter().position(|n| n == after).unwrap()] += 1;
            if after != before && after != "c" {
                moved_elsewhere += 1;
            }
        }
        assert_eq!(moved_elsewhere, 0, "a new database only takes names");
        for count in counts {
            assert!((800..1200).contains(&count), "{counts:?}");
        }
        assert_eq!(rendezvous(&["only".to_string()], "q"), "only");
    }
}
