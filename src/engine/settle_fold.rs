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
    int_cell, read_each, statement_json, text_cell, value, Fold, Rows, SentStatement,
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
/// returned with its queue, or NULL for the first member's (`?2`): every
/// member of an object's batch names the same queue, and the cell is a
/// quarter of the row. Each member's queue and pairs are read from
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
RETURNING nullif(queue, ?2), seq_number, lock_token"
));

/// Every member's `COMPLETE` in one: deletes the rows among `?1` (the
/// members' seq numbers, one flat array: the tokens are the receipts'
/// business) whose receipt now exists. A deleted row was locked (the
/// `state` a lone Complete returns) and its receipt was written by
/// [`RECORD_RECEIPTS_FOLDED`] just before: a `completed` receipt is only
/// ever written beside the delete of its row, so a locked row with one
/// is this run's. Only the id comes back; the unfold finds its member
/// among the recorded rows.
pub(super) const COMPLETE_FOLDED: Statement = crate::statement!(
    "DELETE FROM messages
WHERE id IN (SELECT value FROM json_each(?1))
  AND +state = 'locked'
  AND EXISTS (SELECT 1 FROM settlement_receipts r WHERE r.queue = messages.queue
    AND r.seq_number = messages.id AND r.lock_token = messages.lock_token
    AND r.operation = 'completed' AND r.args = '')
RETURNING id"
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
}

/// Every member's pairs by seq, so a returned row finds the members that
/// named it without walking every member's pairs (a run of 64
/// CompleteBatches of 64 returns 4,096 rows).
struct Holders(Vec<(i64, usize, usize)>);

impl Holders {
    fn of(completes: &[MemberComplete]) -> Self {
        let mut at: Vec<(i64, usize, usize)> = completes
            .iter()
            .enumerate()
            .flat_map(|(m, c)| {
                c.pairs
                    .iter()
                    .enumerate()
                    .map(move |(p, (seq, _))| (*seq, m, p))
            })
            .collect();
        at.sort_unstable();
        Holders(at)
    }

    /// Where `seq`'s pairs stand (by member, in order).
    fn range(&self, seq: i64) -> std::ops::Range<usize> {
        let start = self.0.partition_point(|(s, _, _)| *s < seq);
        let len = self.0[start..]
            .iter()
            .take_while(|(s, _, _)| *s == seq)
            .count();
        start..start + len
    }

    /// The entries of the members (in order, each once) that named
    /// `(seq, token)`.
    fn of_pair(&self, completes: &[MemberComplete], seq: i64, token: &str) -> Vec<usize> {
        let mut entries: Vec<usize> = Vec::new();
        for at in self.range(seq) {
            let (_, m, p) = self.0[at];
            let named = completes
                .get(m)
                .and_then(|c| c.pairs.get(p))
                .is_some_and(|(_, t)| t == token);
            let again = entries.last().is_some_and(|&e| self.0[e].1 == m);
            if named && !again {
                entries.push(at);
            }
        }
        entries
    }
}

/// The first member's queue, which a recorded row leaves out as NULL.
fn first_queue(completes: &[MemberComplete]) -> Option<String> {
    completes.first().map(|c| c.queue.clone())
}

/// `text` as a bound text value.
fn text_arg(text: &str) -> Option<Box<RawValue>> {
    let value = serde_json::to_string(&Value::Text {
        value: text.to_owned(),
    })
    .ok()?;
    RawValue::from_string(value).ok()
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
        let first_queue = text_arg(&first.queue)?;
        let seqs: Vec<i64> = completes
            .iter()
            .flat_map(|c| c.pairs.iter().map(|(seq, _)| *seq))
            .collect();
        let seqs_arg = text_arg(&serde_json::to_string(&seqs).ok()?)?;
        Some(vec![
            statement_json(LIVE_RECEIPTS_FOLDED.sql, vec![&members_arg, first.clock])?,
            statement_json(
                RECORD_RECEIPTS_FOLDED.sql,
                vec![&members_arg, &first_queue, first.clock],
            )?,
            statement_json(COMPLETE_FOLDED.sql, vec![&seqs_arg])?,
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
        let holders = Holders::of(&completes);
        let mut own_recorded = vec![Vec::new(); completes.len()];
        // The pairs whose member was told of its receipt.
        let mut told = vec![false; holders.0.len()];
        for row in &recorded.rows {
            let [queue, seq, token] = row.as_slice() else {
                return None;
            };
            let queue = match text_cell(queue) {
                Some(queue) => queue,
                None if matches!(value(queue)?, Value::Null) => first_queue(&completes)?,
                None => return None,
            };
            let (seq, token) = (int_cell(seq)?, text_cell(token)?);
            for at in holders.of_pair(&completes, seq, &token) {
                let m = holders.0[at].1;
                if completes[m].queue == queue {
                    own_recorded.get_mut(m)?.push(vec![row[1], row[2]]);
                    told[at] = true;
                }
            }
        }
        // A deleted row is the first told member's: after it, the row was
        // gone.
        let mut own_deleted = vec![Vec::new(); completes.len()];
        let locked = RawValue::from_string(r#"{"type":"text","value":"locked"}"#.into()).ok()?;
        for row in &deleted.rows {
            let [id] = row.as_slice() else {
                return None;
            };
            let at = holders.range(int_cell(id)?).find(|&at| told[at])?;
            own_deleted
                .get_mut(holders.0[at].1)?
                .push(vec![*id, &*locked]);
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

    fn member(queue: &str, pairs: &str) -> Vec<Box<RawValue>> {
        let mut args = shared();
        args[0] = json!({"type": "text", "value": queue});
        args[1] = json!({"type": "text", "value": pairs});
        complete(&args)
    }

    /// The run sends the pairs twice and the delete only the seqs; the
    /// receipts come back with NULL for the first member's queue, the
    /// deleted rows as bare ids. Each member gets the rows a lone Complete
    /// would have: its receipts (of its own queue only) and the rows
    /// deleted for it, the first to name a pair, as `[id, 'locked']`.
    #[test]
    fn the_run_carries_seqs_once_and_each_member_finds_its_rows() {
        let members = [
            member("q", r#"[[1,"t"],[2,"u"]]"#),
            member("r", r#"[[1,"t"]]"#),
            member("q", r#"[[2,"u"],[3,"v"],[2,"u"]]"#),
        ];
        let refs: Vec<Vec<&RawValue>> = members
            .iter()
            .map(|m| m.iter().map(|s| &**s).collect())
            .collect();
        let run = CompleteFold.fold(&refs).expect("folds");
        let args = |i: usize| {
            let v: serde_json::Value = serde_json::from_str(&run[i]).expect("json");
            v["args"].clone()
        };
        assert_eq!(args(1)[1], json!({"type": "text", "value": "q"}));
        assert_eq!(args(2), json!([{"type": "text", "value": "[1,2,1,2,3,2]"}]));
        let int = |n: i64| json!({"type": "integer", "value": n.to_string()});
        let text = |t: &str| json!({"type": "text", "value": t});
        let nul = || json!({"type": "null"});
        let live = json!({"rows": [[text("0"), int(0), text("[]")], [text("0"), int(1), text("[]")],
                                    [text("0"), int(2), text("[]")]]});
        // Message 1 is queue q's: the receipt written for the first member
        // (twice, once per pair naming it: INSERT OR REPLACE), none for r's.
        let recorded = json!({"rows": [[nul(), int(1), text("t")], [nul(), int(2), text("u")],
                                        [nul(), int(2), text("u")], [text("s"), int(3), text("v")]]});
        let deleted = json!({"rows": [[int(2)], [int(1)]]});
        let results: Vec<Box<RawValue>> = [live, recorded, deleted]
            .iter()
            .map(|r| RawValue::from_string(r.to_string()).expect("json"))
            .collect();
        let results: Vec<&RawValue> = results.iter().map(|r| &**r).collect();
        let answers = CompleteFold.unfold(&refs, &results).expect("unfolds");
        let rows = |m: usize, step: usize| {
            let v: serde_json::Value = serde_json::from_str(&answers[m][step]).expect("json");
            v["rows"].clone()
        };
        let locked = text("locked");
        assert_eq!(
            rows(0, 1),
            json!([
                [int(1), text("t")],
                [int(2), text("u")],
                [int(2), text("u")]
            ])
        );
        assert_eq!(
            rows(0, 2),
            json!([[int(2), (locked.clone())], [int(1), (locked.clone())]])
        );
        assert_eq!(
            rows(1, 1),
            json!([]),
            "queue r holds no receipt of q's message"
        );
        assert_eq!(rows(1, 2), json!([]));
        assert_eq!(
            rows(2, 1),
            json!([[int(2), text("u")], [int(2), text("u")]])
        );
        assert_eq!(
            rows(2, 2),
            json!([]),
            "message 2 was deleted for the first member"
        );
        // A deleted row no member's receipt names does not add up.
        let stray = RawValue::from_string(json!({"rows": [[int(9)]]}).to_string()).expect("json");
        let mut broken = results.clone();
        broken[2] = &stray;
        assert!(CompleteFold.unfold(&refs, &broken).is_none());
    }
}
