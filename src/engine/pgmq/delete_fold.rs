//! pgmq deletes that meet in a batch, folded (docs/engine.md#folding): the
//! deletes by id of one queue in flight together run as one head and one
//! `DELETE` over all their ids instead of a savepoint and two statements
//! each.
//!
//! The delete already takes a list of ids: the run's is every member's.
//! Each keeps its own answer: the head (the queue is the batch's, so its
//! answer is every member's) and the ids it deleted. An id two members name
//! is deleted by the first, as one after another: the second finds it gone.
//! Archives (a copy before the delete) take a savepoint each.

use serde_json::value::RawValue;

use super::by_id::DELETE;
use super::QUEUE_HEAD;
use crate::store::fold::{
    int_cell, read_each, statement_json, text_cell, Fold, Rows, SentStatement,
};
use crate::store::hrana::Value;

/// The most deletes one run serves.
const CAPACITY: usize = 64;

/// The engine's fold of pgmq's delete by id.
pub struct PgmqDeleteFold;

/// A member delete's statements, as `Engine::by_ids` writes them without
/// an archive.
struct MemberDelete<'a> {
    /// The queue, as bound (shared by the head and the delete).
    queue: &'a RawValue,
    ids: Vec<i64>,
}

impl<'a> MemberDelete<'a> {
    fn read(statements: &[&'a RawValue]) -> Option<Self> {
        let [head, delete] = statements else {
            return None;
        };
        let head = SentStatement::parse(head)?;
        let delete = SentStatement::parse(delete)?;
        let shaped = head.sql == QUEUE_HEAD.sql
            && delete.sql == DELETE.sql
            && head.args.len() == 1
            && delete.args.len() == 2
            && head.args[0].get() == delete.args[0].get();
        if !shaped {
            return None;
        }
        text_cell(head.args[0])?;
        let ids = serde_json::from_str(&text_cell(delete.args[1])?).ok()?;
        Some(MemberDelete {
            queue: head.args[0],
            ids,
        })
    }
}

impl Fold for PgmqDeleteFold {
    fn capacity(&self) -> usize {
        CAPACITY
    }

    fn accepts(&self, statements: &[&RawValue]) -> bool {
        MemberDelete::read(statements).is_some()
    }

    fn fold(&self, members: &[Vec<&RawValue>]) -> Option<Vec<String>> {
        let deletes = read_each(members, MemberDelete::read)?;
        let first = deletes.first()?;
        if deletes.iter().any(|d| d.queue.get() != first.queue.get()) {
            return None;
        }
        let ids: Vec<i64> = deletes.iter().flat_map(|d| d.ids.iter().copied()).collect();
        let ids = serde_json::to_string(&Value::Text {
            value: serde_json::to_string(&ids).ok()?,
        })
        .ok()?;
        let ids = RawValue::from_string(ids).ok()?;
        Some(vec![
            statement_json(QUEUE_HEAD.sql, vec![first.queue])?,
            // The member's own delete takes a list: every member's ids.
            statement_json(DELETE.sql, vec![first.queue, &ids])?,
        ])
    }

    fn unfold(
        &self,
        members: &[Vec<&RawValue>],
        results: &[&RawValue],
    ) -> Option<Vec<Vec<String>>> {
        let deletes = read_each(members, MemberDelete::read)?;
        let [head, deleted] = results else {
            return None;
        };
        let head = Rows::parse(head)?.to_json();
        let deleted = Rows::parse(deleted)?;
        // An id is the first naming member's: after it, the row was gone.
        // Each member's ids sorted, so finding it is a search per member.
        let sorted: Vec<Vec<i64>> = deletes
            .into_iter()
            .map(|mut d| {
                d.ids.sort_unstable();
                d.ids
            })
            .collect();
        let mut own = vec![Vec::new(); sorted.len()];
        for row in &deleted.rows {
            let id = int_cell(row.first()?)?;
            let first = sorted
                .iter()
                .position(|ids| ids.binary_search(&id).is_ok())?;
            own.get_mut(first)?.push(row.clone());
        }
        Some(
            own.into_iter()
                .map(|rows| {
                    let deleted = Rows {
                        affected_row_count: rows.len() as u64,
                        rows,
                    };
                    vec![head.clone(), deleted.to_json()]
                })
                .collect(),
        )
    }

    fn blame(&self, run_step: usize) -> usize {
        // One statement of the run for each of a member's.
        run_step
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stmt(sql: &str, args: &[serde_json::Value]) -> Box<RawValue> {
        let text = json!({"sql": sql, "args": args, "want_rows": true}).to_string();
        RawValue::from_string(text).expect("json")
    }

    fn text(v: &str) -> serde_json::Value {
        json!({"type": "text", "value": v})
    }

    /// A lone delete's statements as the engine writes them.
    fn delete(queue: &str, ids: &str) -> Vec<Box<RawValue>> {
        vec![
            stmt(QUEUE_HEAD.sql, &[text(queue)]),
            stmt(DELETE.sql, &[text(queue), text(ids)]),
        ]
    }

    fn refs(statements: &[Box<RawValue>]) -> Vec<&RawValue> {
        statements.iter().map(|s| &**s).collect()
    }

    /// Only a delete of exactly the engine's shape folds: its two
    /// statements by their texts and argument counts, one queue, ids that
    /// read as a list of integers.
    #[test]
    fn only_a_delete_of_the_engines_shape_folds() {
        let accepted = |s: &[Box<RawValue>]| PgmqDeleteFold.accepts(&refs(s));
        assert!(accepted(&delete("q", "[1,2]")));
        for at in 0..2 {
            let mut other = delete("q", "[1]");
            other[at] = stmt("SELECT 1", &[]);
            assert!(!accepted(&other), "statement {at} replaced");
        }
        let mut archive = delete("q", "[1]");
        archive.insert(1, stmt("SELECT 1", &[]));
        assert!(!accepted(&archive), "three statements");
        let mut other_queue = delete("q", "[1]");
        other_queue[1] = stmt(DELETE.sql, &[text("r"), text("[1]")]);
        assert!(!accepted(&other_queue), "the delete's queue differs");
        let mut long = delete("q", "[1]");
        long[0] = stmt(QUEUE_HEAD.sql, &[text("q"), text("x")]);
        assert!(!accepted(&long), "a head argument more");
        let mut short = delete("q", "[1]");
        short[1] = stmt(DELETE.sql, &[text("q")]);
        assert!(!accepted(&short), "a delete without ids");
        assert!(!accepted(&delete("q", "not ids")), "unreadable ids");
        let mut number = delete("q", "[1]");
        number[0] = stmt(QUEUE_HEAD.sql, &[json!({"type": "integer", "value": "1"})]);
        number[1] = stmt(
            DELETE.sql,
            &[json!({"type": "integer", "value": "1"}), text("[1]")],
        );
        assert!(!accepted(&number), "a queue that is not text");
    }

    /// Members of two queues do not fold together.
    #[test]
    fn deletes_of_two_queues_do_not_fold() {
        let (a, b) = (delete("q", "[1]"), delete("r", "[2]"));
        assert!(PgmqDeleteFold.fold(&[refs(&a), refs(&b)]).is_none());
        let c = delete("q", "[3]");
        assert!(PgmqDeleteFold.fold(&[refs(&a), refs(&c)]).is_some());
    }

    /// A failed run statement is answered on the member statement it
    /// stands for: the head on the head (a schema check that fails reads
    /// as a stale schema, not as a failed delete), the delete on the delete.
    #[test]
    fn each_run_statement_blames_the_member_statement_it_stands_for() {
        let members = [delete("q", "[1]"), delete("q", "[2]")];
        let members: Vec<Vec<&RawValue>> = members.iter().map(|m| refs(m)).collect();
        let run = PgmqDeleteFold.fold(&members).expect("a run");
        assert_eq!(run.len(), 2);
        let sql = |text: &str| {
            let v: serde_json::Value = serde_json::from_str(text).expect("json");
            v["sql"].as_str().expect("sql").to_owned()
        };
        for member in &members {
            for (step, statement) in run.iter().enumerate() {
                let own = SentStatement::parse(member[PgmqDeleteFold.blame(step)]).expect("own");
                assert_eq!(own.sql, sql(statement), "run statement {step}");
            }
        }
    }

    /// Each deleted id is the first naming member's; each member gets the
    /// head's answer and its own rows with their count.
    #[test]
    fn deleted_ids_go_to_the_first_member_naming_them() {
        let members = [
            delete("q", "[1,2]"),
            delete("q", "[2,3]"),
            delete("q", "[4]"),
        ];
        let members: Vec<Vec<&RawValue>> = members.iter().map(|m| refs(m)).collect();
        let int = |v: i64| json!({"type": "integer", "value": v.to_string()});
        let head = RawValue::from_string(
            json!({"cols": [], "rows": [[text("0"), int(1)]], "affected_row_count": 0}).to_string(),
        )
        .expect("json");
        let deleted = RawValue::from_string(
            json!({"cols": [], "rows": [[int(1)], [int(2)], [int(3)]], "affected_row_count": 3})
                .to_string(),
        )
        .expect("json");
        let each = PgmqDeleteFold
            .unfold(&members, &[&head, &deleted])
            .expect("unfolded");
        let rows = |n: &[i64]| {
            let rows: Vec<_> = n.iter().map(|&i| vec![int(i)]).collect();
            json!({"cols": [], "rows": rows, "affected_row_count": n.len()})
        };
        let head_json = json!({"cols": [], "rows": [[text("0"), int(1)]], "affected_row_count": 0});
        let parsed: Vec<Vec<serde_json::Value>> = each
            .iter()
            .map(|m| {
                m.iter()
                    .map(|r| serde_json::from_str(r).expect("json"))
                    .collect()
            })
            .collect();
        assert_eq!(
            parsed,
            vec![
                vec![head_json.clone(), rows(&[1, 2])],
                vec![head_json.clone(), rows(&[3])],
                vec![head_json, rows(&[])],
            ]
        );
        let stranger = RawValue::from_string(
            json!({"cols": [], "rows": [[int(9)]], "affected_row_count": 1}).to_string(),
        )
        .expect("json");
        assert!(
            PgmqDeleteFold
                .unfold(&members, &[&head, &stranger])
                .is_none(),
            "a row no member named does not add up"
        );
    }
}
