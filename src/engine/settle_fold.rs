//! Completes that meet in a batch, folded (docs/engine.md#folding): the
//! Complete and CompleteBatch requests of a batch settle their messages with
//! one receipt statement and one delete instead of a savepoint and three
//! statements each.
//!
//! Each keeps its own answer: its pairs' live receipts (a replay), the pairs
//! whose receipt the run wrote under the fence, and the rows it deleted.
//! Two members naming the same message with its token both succeed, as
//! they would one after another (the second a replay of the first's
//! receipt); the row is deleted, and counted, once, for the first.

use serde_json::value::RawValue;

use super::settle::{COMPLETE, LIVE_RECEIPTS, RECEIPT_LIFETIME_MS, RECORD_RECEIPTS};
use crate::store::fold::{
    int_cell, read_each, statement_json, text_cell, Fold, Rows, SentStatement,
};
use crate::store::hrana::Value;
use crate::store::Statement;

/// Every member's `LIVE_RECEIPTS` in one, and the schema check: a row per
/// member (`?1`: `[[queue, pairs], …]`), its index and the `[seq, token]`
/// pairs of its own that hold a live `completed` receipt.
pub(super) const LIVE_RECEIPTS_FOLDED: Statement = crate::statement!(crate::schema_checked!(
    "CAST(mj.key AS INTEGER), (SELECT json_group_array(json_array(r.seq_number, r.lock_token))
  FROM settlement_receipts r
  WHERE r.queue = mj.value ->> 0 AND r.operation = 'completed' AND r.args = '' AND r.expires_at > {now}
    AND EXISTS (SELECT 1 FROM json_each(mj.value, '$[1]') j WHERE json_extract(j.value, '$[0]') = r.seq_number
      AND json_extract(j.value, '$[1]') = r.lock_token)
    AND r.seq_number IN (SELECT json_extract(value, '$[0]') FROM json_each(mj.value, '$[1]')))
FROM json_each(?1) mj"
));

/// Every member's `RECORD_RECEIPTS` in one: a `completed` receipt for each
/// pair whose message is still locked by it with a live lease (the fence),
/// returned with its queue. Each member's queue and pairs are read from
/// its JSON once (`mj`), not once a pair: reading the queue from the
/// member's text parsed the whole member again for every pair.
pub(super) const RECORD_RECEIPTS_FOLDED: Statement = crate::statement!(const_format::concatcp!(
    "\
WITH mj AS MATERIALIZED (SELECT value ->> 0 AS queue, value -> 1 AS pairs FROM json_each(?1))
INSERT OR REPLACE INTO settlement_receipts
  (queue, seq_number, lock_token, operation, args, created_at, expires_at)
SELECT m.queue, m.id, m.lock_token, 'completed', '', {now}, {now} + ",
    RECEIPT_LIFETIME_MS,
    "
FROM mj, json_each(mj.pairs) j
  CROSS JOIN messages m ON m.id = json_extract(j.value, '$[0]')
WHERE m.queue = mj.queue AND m.state = 'locked' AND m.lock_token = json_extract(j.value, '$[1]')
  AND m.locked_until > {now} AND (m.expires_at = 0 OR m.expires_at > {now})
RETURNING queue, seq_number, lock_token"
));

/// Every member's `COMPLETE` in one: deletes the members' rows whose
/// receipt now exists, returned with the token that settled them.
pub(super) const COMPLETE_FOLDED: Statement = crate::statement!(
    "DELETE FROM messages
WHERE id IN (SELECT json_extract(j.value, '$[0]') FROM json_each(?1) mj, json_each(mj.value, '$[1]') j)
  AND +state = 'locked'
  AND EXISTS (SELECT 1 FROM settlement_receipts r WHERE r.queue = messages.queue
    AND r.seq_number = messages.id AND r.lock_token = messages.lock_token
    AND r.operation = 'completed' AND r.args = '')
RETURNING id, state, lock_token"
);

/// The most Completes one run settles.
const CAPACITY: usize = 64;

/// The engine's fold of Complete and CompleteBatch.
pub struct CompleteFold;

/// A member Complete's statements, as `Engine::settle_items` writes them.
struct MemberComplete<'a> {
    queue: String,
    /// Its `[seq, token]` pairs, as the JSON it bound.
    pairs_json: String,
    pairs: Vec<(i64, String)>,
    clock: &'a RawValue,
}

impl<'a> MemberComplete<'a> {
    fn read(statements: &[&'a RawValue]) -> Option<Self> {
        let [live, record, complete] = statements else {
            return None;
        };
        let live = SentStatement::parse(live)?;
        let record = SentStatement::parse(record)?;
        let complete = SentStatement::parse(complete)?;
        let shaped = live.sql == LIVE_RECEIPTS.sql
            && record.sql == RECORD_RECEIPTS.sql
            && complete.sql == COMPLETE.sql
            && live.args.len() == 5
            && record.args.len() == 5
            && complete.args.len() == 4;
        if !shaped {
            return None;
        }
        let text = text_cell;
        // One request's statements share their arguments.
        let same = (0..4).all(|i| {
            live.args[i].get() == record.args[i].get()
                && live.args[i].get() == complete.args[i].get()
        }) && live.args[4].get() == record.args[4].get();
        if !same || text(live.args[2])? != "completed" || !text(live.args[3])?.is_empty() {
            return None;
        }
        let pairs_json = text(live.args[1])?;
        let pairs = serde_json::from_str(&pairs_json).ok()?;
        Some(MemberComplete {
            queue: text(live.args[0])?,
            pairs_json,
            pairs,
            clock: live.args[4],
        })
    }

    fn holds(&self, seq: i64, token: &str) -> bool {
        self.pairs.iter().any(|(s, t)| *s == seq && t == token)
    }
}

impl Fold for CompleteFold {
    fn capacity(&self) -> usize {
        CAPACITY
    }

    fn accepts(&self, statements: &[&RawValue]) -> bool {
        MemberComplete::read(statements).is_some()
    }

    fn fold(&self, members: &[Vec<&RawValue>]) -> Option<Vec<String>> {
        let completes = read_each(members, MemberComplete::read)?;
        let first = completes.first()?;
        if completes.iter().any(|c| c.clock.get() != first.clock.get()) {
            return None;
        }
        let each: Vec<String> = completes
            .iter()
            .map(|c| {
                let queue = serde_json::to_string(&c.queue).unwrap_or_default();
                format!("[{queue},{}]", c.pairs_json)
            })
            .collect();
        let members_arg = serde_json::to_string(&Value::Text {
            value: format!("[{}]", each.join(",")),
        })
        .ok()?;
        let members_arg = RawValue::from_string(members_arg).ok()?;
        Some(vec![
            statement_json(LIVE_RECEIPTS_FOLDED.sql, vec![&members_arg, first.clock])?,
            statement_json(RECORD_RECEIPTS_FOLDED.sql, vec![&members_arg, first.clock])?,
            statement_json(COMPLETE_FOLDED.sql, vec![&members_arg])?,
        ])
    }

    fn unfold(
        &self,
        members: &[Vec<&RawValue>],
        results: &[&RawValue],
    ) -> Option<Vec<Vec<String>>> {
        let completes = read_each(members, MemberComplete::read)?;
        let [live, recorded, deleted] = results else {
            return None;
        };
        let live = Rows::parse(live)?;
        let recorded = Rows::parse(recorded)?;
        let deleted = Rows::parse(deleted)?;
        let mut own_live = vec![None; completes.len()];
        for row in &live.rows {
            let [check, whose, pairs] = row.as_slice() else {
                return None;
            };
            let m = usize::try_from(int_cell(whose)?).ok()?;
            *own_live.get_mut(m)? = Some(vec![*check, *pairs]);
        }
        let mut own_recorded = vec![Vec::new(); completes.len()];
        for row in &recorded.rows {
            let [queue, seq, token] = row.as_slice() else {
                return None;
            };
            let (queue, seq, token) = (text_cell(queue)?, int_cell(seq)?, text_cell(token)?);
            for (c, own) in completes.iter().zip(own_recorded.iter_mut()) {
                if c.queue == queue && c.holds(seq, &token) {
                    own.push(vec![row[1], row[2]]);
                }
            }
        }
        // A deleted row is the first holder's: after it, the row was gone.
        let mut own_deleted = vec![Vec::new(); completes.len()];
        for row in &deleted.rows {
            let [id, state, token] = row.as_slice() else {
                return None;
            };
            let (seq, token) = (int_cell(id)?, text_cell(token)?);
            let holder = completes.iter().position(|c| c.holds(seq, &token))?;
            own_deleted.get_mut(holder)?.push(vec![*id, *state]);
        }
        own_live
            .into_iter()
            .zip(own_recorded)
            .zip(own_deleted)
            .map(|((live, recorded), deleted)| {
                let live = Rows {
                    rows: vec![live?],
                    affected_row_count: 0,
                };
                let recorded = Rows {
                    affected_row_count: recorded.len() as u64,
                    rows: recorded,
                };
                let deleted = Rows {
                    affected_row_count: deleted.len() as u64,
                    rows: deleted,
                };
                Some(vec![live.to_json(), recorded.to_json(), deleted.to_json()])
            })
            .collect()
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

    /// A lone Complete's statements as the engine writes them, from its
    /// five shared arguments (queue, pairs, operation, args, clock).
    fn complete(args: &[serde_json::Value]) -> Vec<Box<RawValue>> {
        vec![
            stmt(LIVE_RECEIPTS.sql, args),
            stmt(RECORD_RECEIPTS.sql, args),
            stmt(COMPLETE.sql, &args[..args.len().min(4)]),
        ]
    }

    fn shared() -> Vec<serde_json::Value> {
        let text = |v: &str| json!({"type": "text", "value": v});
        vec![
            text("q"),
            text(r#"[[1,"t"]]"#),
            text("completed"),
            text(""),
            json!({"type": "null"}),
        ]
    }

    fn accepted(statements: &[Box<RawValue>]) -> bool {
        let refs: Vec<&RawValue> = statements.iter().map(|s| &**s).collect();
        CompleteFold.accepts(&refs)
    }

    /// Only a Complete (or CompleteBatch) of exactly the engine's shape
    /// folds: its three statements by their texts and argument counts,
    /// one request's arguments shared by all three, the plain `completed`
    /// operation with no arguments.
    #[test]
    fn only_a_complete_of_the_engines_shape_folds() {
        assert!(accepted(&complete(&shared())));
        for at in 0..3 {
            let mut other = complete(&shared());
            other[at] = stmt("SELECT 1", &[]);
            assert!(!accepted(&other), "statement {at} replaced");
        }
        let short = complete(&shared()[..4]);
        assert!(!accepted(&short), "four arguments");
        for at in 0..3 {
            let mut long = complete(&shared());
            let mut args = shared();
            args.push(json!({"type": "null"}));
            let sql = [LIVE_RECEIPTS.sql, RECORD_RECEIPTS.sql, COMPLETE.sql][at];
            long[at] = stmt(sql, &args[..if at == 2 { 5 } else { 6 }]);
            assert!(!accepted(&long), "statement {at} with an argument more");
        }
        for at in 0..5 {
            let mut other = complete(&shared());
            let mut args = shared();
            args[at] = json!({"type": "text", "value": "other"});
            let sql = [LIVE_RECEIPTS.sql, RECORD_RECEIPTS.sql, COMPLETE.sql];
            // Only the first or second statement differs from the others.
            let which = if at == 4 { 1 } else { at % 2 };
            let len = if which == 2 { 4 } else { 5 };
            other[which] = stmt(sql[which], &args[..len]);
            assert!(!accepted(&other), "argument {at} not shared");
        }
        let mut third = complete(&shared());
        let mut args = shared();
        args[0] = json!({"type": "text", "value": "other"});
        third[2] = stmt(COMPLETE.sql, &args[..4]);
        assert!(!accepted(&third), "the delete's queue not shared");
        for (at, v) in [(2, "abandoned"), (3, "[1000]")] {
            let mut args = shared();
            args[at] = json!({"type": "text", "value": v});
            assert!(!accepted(&complete(&args)), "argument {at} {v}");
        }
        let mut args = shared();
        args[1] = json!({"type": "text", "value": "not pairs"});
        assert!(!accepted(&complete(&args)), "unreadable pairs");
    }
}
