//! Where a name lives when the broker spans several databases
//! (docs/databases.md): the catalog's `placements` table (migration 0009).
//! These programs run on the catalog only. A placement, once written, never
//! changes, so whoever read it may keep it.

use super::{unexpected, Engine, EngineError};
use crate::store::{Committed, Program, Statement, StepId, StoreError, Transport};

/// The database `?1` was placed in: no row for a name never created.
pub(super) const PLACEMENT_OF: Statement =
    crate::statement!("SELECT database FROM placements WHERE name = ?1");

/// Places `?1` in database `?2` unless it was placed before.
const PLACE: Statement = crate::statement!(
    "INSERT INTO placements (name, database) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING"
);

/// Places `?1` where `?2` was placed, unless `?1` was placed before.
pub(super) const PLACE_BESIDE: Statement = crate::statement!(
    "\
INSERT INTO placements (name, database)
SELECT ?1, database FROM placements WHERE name = ?2
ON CONFLICT (name) DO NOTHING"
);

impl<T: Transport> Engine<T> {
    /// The database `name` was placed in (`''`: the catalog itself), or
    /// `None` when no such name was ever created.
    pub async fn placement(&self, name: &str) -> Result<Option<String>, EngineError> {
        let mut program = Program::read();
        let of = program.step(&PLACEMENT_OF, vec![name.into()]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        let database = match committed.first_row(of) {
            Some(row) => Some(row.text(0)?.to_owned()),
            None => None,
        };
        Ok(database)
    }

    /// Places `name` in `database` unless it has a placement already; the
    /// placement that holds (the earlier one wins).
    pub async fn place(&self, name: &str, database: &str) -> Result<String, EngineError> {
        let mut program = Program::write();
        program.step(&PLACE, vec![name.into(), database.into()]);
        let of = program.step(&PLACEMENT_OF, vec![name.into()]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        placed(&committed, of)
    }

    /// Places `anchor` in `database` unless it has a placement already, then
    /// `name` beside it unless `name` has one: the placement of `name`
    /// that holds, which the caller compares with the anchor's (a topic's
    /// subscriptions live with it).
    pub async fn place_beside(
        &self,
        name: &str,
        anchor: &str,
        database: &str,
    ) -> Result<(String, String), EngineError> {
        let mut program = Program::write();
        program.step(&PLACE, vec![anchor.into(), database.into()]);
        program.step(&PLACE_BESIDE, vec![name.into(), anchor.into()]);
        let anchor_of = program.step(&PLACEMENT_OF, vec![anchor.into()]);
        let name_of = program.step(&PLACEMENT_OF, vec![name.into()]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        Ok((placed(&committed, anchor_of)?, placed(&committed, name_of)?))
    }
}

/// The placement a write program just made sure of: always there to read.
fn placed(committed: &Committed, of: StepId) -> Result<String, EngineError> {
    match committed.first_row(of) {
        Some(row) => Ok(row.text(0)?.to_owned()),
        None => Err(EngineError::Store(StoreError::Failed(
            "placement missing right after it was written".into(),
        ))),
    }
}
