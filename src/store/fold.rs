//! Folding (docs/engine.md#folding): members of one kind that meet in a
//! batch are served by **one** statement per step instead of a savepoint
//! each, so sqld prepares and runs each statement once for all of them.
//!
//! The store knows no queue semantics: a [`Fold`] is defined by the engine,
//! beside the statements it replaces, and handed to the coalescer by whoever
//! builds it. The protocol is the coalescer's: a run of members becomes one
//! savepoint holding the fold's statements (each runs only if the one before
//! it succeeded, or its gate found nothing to do), and the fold rebuilds
//! from their results the results each member's own statements would have
//! had, so the store classifies each member's answer exactly as if it had
//! run alone.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::hrana::Value;

/// One kind of member that folds.
pub trait Fold: Sync {
    /// Most members one run may serve.
    fn capacity(&self) -> usize;
    /// Whether a member whose statements (between its `BEGIN` and `COMMIT`,
    /// each run only if the one before it succeeded) are `statements` is of
    /// this kind.
    fn accepts(&self, statements: &[&RawValue]) -> bool;
    /// The run's statements for `members` (each one's statements, accepted,
    /// in order), or `None` when these do not fold after all (the members
    /// then take a savepoint each).
    fn fold(&self, members: &[Vec<&RawValue>]) -> Option<Vec<String>>;
    /// Each member's statements' results, from `members` (as given to
    /// [`Fold::fold`]) and the run's statements' results (all of them
    /// succeeded); `None` when the answer does not add up, and no member
    /// can be told what it did.
    fn unfold(&self, members: &[Vec<&RawValue>], results: &[&RawValue])
        -> Option<Vec<Vec<String>>>;
    /// The member statement answered with the error of the run's statement
    /// `run_step` when it failed.
    fn blame(&self, run_step: usize) -> usize;
    /// The run statement (an index into [`Fold::fold`]'s) that is a gate, as
    /// a program's gate (`Program::gate`): when it fails there is nothing to
    /// do, the statement right after it is skipped, both read as no rows in
    /// [`Fold::unfold`], and the run goes on. `None`: every statement must
    /// succeed.
    fn gate(&self) -> Option<usize> {
        None
    }
}

/// A statement as a member sent it. Its text is borrowed from the member's
/// pipeline: `statement!` texts hold nothing JSON escapes.
#[derive(Debug, Deserialize)]
pub struct SentStatement<'a> {
    #[serde(borrow)]
    pub sql: Cow<'a, str>,
    #[serde(borrow, default)]
    pub args: Vec<&'a RawValue>,
}

impl<'a> SentStatement<'a> {
    pub fn parse(raw: &'a RawValue) -> Option<Self> {
        serde_json::from_str(raw.get()).ok()
    }
}

/// Every member of a run as `read` makes it out (each fold's own reader of
/// a member's statements), or `None` when one does not read.
pub fn read_each<'a, M>(
    members: &[Vec<&'a RawValue>],
    read: impl Fn(&[&'a RawValue]) -> Option<M>,
) -> Option<Vec<M>> {
    members.iter().map(|m| read(m)).collect()
}

/// A bound value or a result cell, decoded.
pub fn value(raw: &RawValue) -> Option<Value> {
    serde_json::from_str(raw.get()).ok()
}

/// A statement's result as a fold reads and rebuilds it: only what the
/// store reads of a result (its rows, its affected row count).
#[derive(Debug, Default, Deserialize, Serialize)]
pub struct Rows<'a> {
    #[serde(borrow, default)]
    pub rows: Vec<Vec<&'a RawValue>>,
    #[serde(default)]
    pub affected_row_count: u64,
}

impl<'a> Rows<'a> {
    pub fn parse(raw: &'a RawValue) -> Option<Self> {
        serde_json::from_str(raw.get()).ok()
    }

    /// The result as JSON, with empty `cols` (the store reads cells by
    /// position).
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        struct Out<'r, 'a> {
            cols: [(); 0],
            rows: &'r [Vec<&'a RawValue>],
            affected_row_count: u64,
        }
        serde_json::to_string(&Out {
            cols: [],
            rows: &self.rows,
            affected_row_count: self.affected_row_count,
        })
        .unwrap_or_default()
    }
}

/// A cell as an integer (`None` for NULL or another type).
pub fn int_cell(raw: &RawValue) -> Option<i64> {
    match value(raw)? {
        Value::Integer { value } => Some(value),
        _ => None,
    }
}

/// A cell or a bound value as text (`None` for NULL or another type).
pub fn text_cell(raw: &RawValue) -> Option<String> {
    match value(raw)? {
        Value::Text { value } => Some(value),
        _ => None,
    }
}

/// A run statement as the batch sends it.
pub fn statement_json(sql: &str, args: Vec<&RawValue>) -> Option<String> {
    #[derive(Serialize)]
    struct Out<'a> {
        sql: &'a str,
        args: Vec<&'a RawValue>,
        want_rows: bool,
    }
    serde_json::to_string(&Out {
        sql,
        args,
        want_rows: true,
    })
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).expect("json")
    }

    #[test]
    fn a_sent_statement_reads_its_text_and_arguments() {
        let stmt = raw(
            r#"{"sql":"SELECT\n?1","args":[{"type":"integer","value":"7"},{"type":"null"}],"want_rows":true}"#,
        );
        let sent = SentStatement::parse(&stmt).expect("statement");
        assert_eq!(sent.sql, "SELECT\n?1");
        assert_eq!(sent.args.len(), 2);
        assert_eq!(int_cell(sent.args[0]), Some(7));
        assert_eq!(int_cell(sent.args[1]), None);
    }

    #[test]
    fn rows_round_trip_with_their_count() {
        let result = raw(
            r#"{"cols":[{"name":"id"}],"rows":[[{"type":"integer","value":"3"}]],"affected_row_count":1,"rows_read":2}"#,
        );
        let rows = Rows::parse(&result).expect("rows");
        assert_eq!(
            rows.to_json(),
            r#"{"cols":[],"rows":[[{"type":"integer","value":"3"}]],"affected_row_count":1}"#
        );
    }
}
