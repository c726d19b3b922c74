//! Sends that meet in a batch, folded (docs/engine.md#folding): the Sends
//! of one queue or topic in flight together are written by one `INSERT`
//! over all their copies instead of a savepoint and five statements each.
//!
//! Each Send still gets its own verdict (`send_ok!` per member: the topic
//! fingerprint it routed with, its queue, its ungrouped copies), and the
//! outcome it would have had alone, in member order: a member's copy is
//! written exactly when it would have been had the members before it run
//! first (dedup: the first admitted copy of a key across the run, and none
//! while an entry is in its window). Scheduled Sends (a guard of their own)
//! and Sends checked by a credential prelude take a savepoint each.

use serde_json::value::RawValue;

use super::send::{COUNT_SENT, INSERT_MESSAGES, READ_OUTCOME};
use crate::store::fold::{
    int_cell, read_each, statement_json, text_cell, value, Fold, Rows, SentStatement,
};
use crate::store::hrana::Value;
use crate::store::Statement;

/// The most Sends one run writes: one body blob parameter each.
const CAPACITY: usize = 64;

/// The members of `?1` (`[[name, fingerprint, ungrouped queues, ttl,
/// copies], …]`), each read apart once: a copy that reads its member's
/// name or TTL from the member's JSON text parses the whole member again
/// (64 copies and more), which cost sqld about a millisecond per folded
/// Send 64 (docs/bench.md). `plain`: a direct send (fingerprint `0:0`, so
/// every copy is for the member's own queue, which `copies_json` leaves
/// unnamed) to a queue without a dedup window, whose admitted copies are
/// all written; the statements below skip its copies where only dedup
/// needs them (docs/bench.md, "Only dedup pays for dedup").
macro_rules! members {
    () => {
        "WITH mj AS MATERIALIZED (SELECT CAST(mr.key AS INTEGER) AS m, mr.value ->> 0 AS name,
    mr.value ->> 1 AS fingerprint, mr.value -> 2 AS ungrouped, mr.value ->> 3 AS ttl,
    mr.value -> 4 AS copies, mr.value ->> 1 = '0:0' AND coalesce((SELECT pq.dedup_window_ms
      FROM queues pq WHERE pq.name = mr.value ->> 0), 0) <= 0 AS plain
  FROM json_each(?1) mr)
"
    };
}

/// Member `mj` (a row of [`members!`]) may be written: the per-member form of `send.rs`'s
/// `send_ok!`. It reads only `mj`, so SQLite checks it once per member.
macro_rules! member_ok {
    () => {
        concat!(
            fingerprint!(),
            " = mj.fingerprint
    AND NOT (",
            queue_missing!(),
            ") AND NOT (",
            group_missing!(),
            ")"
        )
    };
}

/// Member `mj`'s topic fingerprint now (`send.rs`'s `fingerprint!`).
macro_rules! fingerprint {
    () => {
        "(SELECT count(*) || ':' || coalesce(max(revision), 0) FROM subscriptions
      WHERE topic = mj.name)"
    };
}

/// Member `mj` is a direct send to a queue that does not exist.
macro_rules! queue_missing {
    () => {
        "mj.fingerprint = '0:0' AND NOT EXISTS (SELECT 1 FROM queues WHERE name = mj.name)"
    };
}

/// A copy of member `mj` without a group id is bound for a `group_fifo` queue.
macro_rules! group_missing {
    () => {
        "EXISTS (SELECT 1 FROM json_each(mj.ungrouped) g JOIN queues gq ON gq.name = g.value
      WHERE gq.ordering_mode = 'group_fifo')"
    };
}

/// The copies of the members that may be written and match `$and` (a
/// condition on the member `mj`, which SQLite checks once per member), with their
/// queue's dedup window and TTL (the Send's, capped by the queue default,
/// as `INSERT_MESSAGES` caps it). Clock-free, so every statement of the
/// run admits the same copies.
macro_rules! copies {
    ($and:literal) => {
        concat!(
            "SELECT mj.m, CAST(j.key AS INTEGER) AS pos, j.value AS v,
      coalesce(j.value ->> 5, mj.name) AS queue,
      coalesce(j.value ->> 6, j.value ->> 0) AS dkey, q.dedup_window_ms AS window, CASE
        WHEN q.default_ttl_ms > 0 AND (mj.ttl <= 0 OR mj.ttl > q.default_ttl_ms)
          THEN q.default_ttl_ms
        WHEN mj.ttl > 0 THEN mj.ttl ELSE 0 END AS ttl
    FROM mj, json_each(mj.copies) j JOIN queues q ON q.name = coalesce(j.value ->> 5, mj.name)
    WHERE ",
            member_ok!(),
            " ",
            $and
        )
    };
}

/// The copies of [`copies!`] that match `$and`, each with `nth`: its rank
/// among those of its `(queue, key)`, in member then message order.
macro_rules! ranked {
    ($and:literal) => {
        concat!(
            "SELECT a.*, row_number() OVER (PARTITION BY a.queue, a.dkey ORDER BY a.m, a.pos) AS nth
  FROM (",
            copies!($and),
            ") a"
        )
    };
}

/// The admitted copies, each with `nth` as [`ranked!`] gives it. A plain
/// member's copies are not ranked (none of them is a dedup copy): ranking
/// sorts every copy of the run, which cost sqld about as much as the
/// insert itself (docs/bench.md, "Only dedup pays for dedup").
macro_rules! admitted {
    () => {
        concat!(
            "(SELECT c.*, 1 AS nth FROM (",
            copies!("AND mj.plain"),
            ") c
UNION ALL
",
            ranked!("AND NOT mj.plain"),
            ") cp"
        )
    };
}

/// Step 1 of a run: every member's copies that are written, in member then
/// message order. `?1` the members `[[name, fingerprint, ungrouped queues,
/// ttl, copies], …]` (each as the Send's own `INSERT_MESSAGES` binds them),
/// `?2`…`?65` member *m*'s bodies as `?(2 + m)`. Returns the new seqs.
pub(super) const INSERT_FOLDED: Statement = crate::statement!(concat!(
    members!(),
    "INSERT INTO messages (queue, state, visible_at, enqueued_at, expires_at, message_id,
  correlation_id, reply_to, group_id, content_type, subject, properties, body, dedup_key,
  request_hash)
SELECT cp.queue, 'active', {now}, {now}, CASE WHEN cp.ttl > 0 THEN {now} + cp.ttl ELSE 0 END,
  cp.v ->> 6, cp.v ->> 7, cp.v ->> 8, cp.v ->> 9, cp.v ->> 10, cp.v ->> 11, cp.v ->> 12,
  coalesce(substr(CASE cp.m WHEN 0 THEN ?2 WHEN 1 THEN ?3 WHEN 2 THEN ?4 WHEN 3 THEN ?5
    WHEN 4 THEN ?6 WHEN 5 THEN ?7 WHEN 6 THEN ?8 WHEN 7 THEN ?9 WHEN 8 THEN ?10 WHEN 9 THEN ?11
    WHEN 10 THEN ?12 WHEN 11 THEN ?13 WHEN 12 THEN ?14 WHEN 13 THEN ?15 WHEN 14 THEN ?16
    WHEN 15 THEN ?17 WHEN 16 THEN ?18 WHEN 17 THEN ?19 WHEN 18 THEN ?20 WHEN 19 THEN ?21
    WHEN 20 THEN ?22 WHEN 21 THEN ?23 WHEN 22 THEN ?24 WHEN 23 THEN ?25 WHEN 24 THEN ?26
    WHEN 25 THEN ?27 WHEN 26 THEN ?28 WHEN 27 THEN ?29 WHEN 28 THEN ?30 WHEN 29 THEN ?31
    WHEN 30 THEN ?32 WHEN 31 THEN ?33 WHEN 32 THEN ?34 WHEN 33 THEN ?35 WHEN 34 THEN ?36
    WHEN 35 THEN ?37 WHEN 36 THEN ?38 WHEN 37 THEN ?39 WHEN 38 THEN ?40 WHEN 39 THEN ?41
    WHEN 40 THEN ?42 WHEN 41 THEN ?43 WHEN 42 THEN ?44 WHEN 43 THEN ?45 WHEN 44 THEN ?46
    WHEN 45 THEN ?47 WHEN 46 THEN ?48 WHEN 47 THEN ?49 WHEN 48 THEN ?50 WHEN 49 THEN ?51
    WHEN 50 THEN ?52 WHEN 51 THEN ?53 WHEN 52 THEN ?54 WHEN 53 THEN ?55 WHEN 54 THEN ?56
    WHEN 55 THEN ?57 WHEN 56 THEN ?58 WHEN 57 THEN ?59 WHEN 58 THEN ?60 WHEN 59 THEN ?61
    WHEN 60 THEN ?62 WHEN 61 THEN ?63 WHEN 62 THEN ?64 WHEN 63 THEN ?65 END,
    (cp.v ->> 1) + 1, cp.v ->> 2), x''),
  CASE WHEN cp.window > 0 THEN cp.dkey END,
  CASE WHEN cp.window > 0 THEN cp.v ->> 0 END
FROM ",
    admitted!(),
    "
WHERE cp.window <= 0 OR (cp.nth = 1 AND NOT EXISTS (SELECT 1 FROM dedup d
  WHERE d.queue = cp.queue AND d.dedup_key = cp.dkey AND d.seen_at > {now} - cp.window))
ORDER BY cp.m, cp.pos
RETURNING id"
));

/// Step 2, right after the insert (`changes()` is still its count: the
/// statement reads only): every member's `READ_OUTCOME` in one, the same
/// tagged rows behind the member's index (NULL: a row for every member),
/// and, tagged 4, how many copies of each member the insert wrote, so each
/// member gets its own seqs. One statement, not two: sqld prepares and
/// materializes the members once (docs/bench.md, "A fold's gate; the
/// outcome and count in one statement").
///
/// A plain member that may be written wrote every copy. Otherwise a copy
/// was written iff it was admitted and its queue has no window, or it is
/// the first of its key and the key's entry now holds one of the insert's
/// seqs (the last `changes()` that AUTOINCREMENT handed out, as
/// `COUNT_SENT` reads them). The count is clock-free, so it counts what the
/// insert did.
pub(super) const READ_OUTCOMES: Statement = crate::statement!(concat!(
    members!(),
    "SELECT mj.m, 0, CASE WHEN ",
    fingerprint!(),
    " <> mj.fingerprint THEN 'topic_changed' WHEN ",
    queue_missing!(),
    " THEN 'queue_missing' WHEN ",
    group_missing!(),
    " THEN 'group_required' ELSE 'ok' END, NULL, NULL, NULL
FROM mj
UNION ALL
SELECT mj.m, 4, json_array_length(mj.copies), NULL, NULL, NULL FROM mj WHERE mj.plain AND ",
    member_ok!(),
    "
UNION ALL
SELECT cp.m, 4, count(*), NULL, NULL, NULL FROM (",
    ranked!("AND NOT mj.plain"),
    ") cp
WHERE cp.window <= 0 OR (cp.nth = 1 AND EXISTS (SELECT 1 FROM dedup d
  WHERE d.queue = cp.queue AND d.dedup_key = cp.dkey
    AND d.seq_number > (SELECT seq FROM sqlite_sequence WHERE name = 'messages') - changes()))
GROUP BY cp.m
UNION ALL
SELECT NULL, 1, d.queue, d.dedup_key, d.request_hash, d.seq_number
FROM (SELECT DISTINCT coalesce(j.value ->> 5, mj.name) AS queue,
      coalesce(j.value ->> 6, j.value ->> 0) AS dkey
    FROM mj, json_each(mj.copies) j WHERE NOT mj.plain) k
  JOIN queues q ON q.name = k.queue AND q.dedup_window_ms > 0
  JOIN dedup d ON d.queue = k.queue AND d.dedup_key = k.dkey
UNION ALL
SELECT mj.m, 2, s.subscription, s.filter, s.revision, NULL
FROM mj JOIN subscriptions s ON s.topic = mj.name
WHERE ",
    fingerprint!(),
    " <> mj.fingerprint
UNION ALL
SELECT NULL, 3, q.name, NULL, NULL, {now} FROM queues q
WHERE q.name IN (SELECT mj.name FROM mj
    WHERE mj.fingerprint = '0:0' AND json_array_length(mj.copies) > 0
  UNION SELECT coalesce(j.value ->> 5, mj.name)
    FROM mj, json_each(mj.copies) j WHERE mj.fingerprint <> '0:0')
  AND q.waiters_until > {now}"
));

/// The tag of [`READ_OUTCOMES`]' rows that count a member's written copies
/// (the others are its `READ_OUTCOME` rows).
const WRITTEN: i64 = 4;

/// The engine's fold of direct Sends and publishes.
pub struct SendFold;

/// A member Send's statements, as `Engine::try_send` writes them.
struct MemberSend<'a> {
    schema: &'a RawValue,
    name: String,
    fingerprint: String,
    copies: String,
    ungrouped: String,
    ttl: i64,
    body: &'a RawValue,
    clock: &'a RawValue,
}

/// `INSERT_MESSAGES`'s arguments: 6 values, 16 body blobs, the clock.
const INSERT_ARGS: usize = 23;

impl<'a> MemberSend<'a> {
    fn read(statements: &[&'a RawValue]) -> Option<Self> {
        let [schema, insert, count, outcome] = statements else {
            return None;
        };
        let insert = SentStatement::parse(insert)?;
        let count = SentStatement::parse(count)?;
        let outcome = SentStatement::parse(outcome)?;
        let shaped = SentStatement::parse(schema)?.sql == crate::store::SCHEMA_CHECK.sql
            && insert.sql == INSERT_MESSAGES.sql
            && count.sql == COUNT_SENT.sql
            && outcome.sql == READ_OUTCOME.sql
            && insert.args.len() == INSERT_ARGS;
        if !shaped {
            return None;
        }
        let text = |i: usize| text_cell(insert.args[i]);
        let int = |i: usize| int_cell(insert.args[i]);
        // Only the first body blob may hold bodies (a member is at most
        // `MEMBER_MAX_BYTES`, far below one blob's 4 MiB).
        let other_blobs_empty = insert.args[7..22]
            .iter()
            .all(|b| matches!(value(b), Some(Value::Blob { base64 }) if base64.is_empty()));
        let body = insert.args[6];
        let body_is_blob = matches!(value(body), Some(Value::Blob { .. }));
        if int(4) != Some(0) || !other_blobs_empty || !body_is_blob {
            return None;
        }
        Some(MemberSend {
            schema,
            name: text(0)?,
            fingerprint: text(1)?,
            copies: text(2)?,
            ungrouped: text(3)?,
            ttl: int(5)?,
            body,
            clock: insert.args[22],
        })
    }

    /// `[name, fingerprint, ungrouped queues, ttl, copies]`, the last
    /// three spliced in as the JSON they already are.
    fn member_json(&self) -> String {
        let name = serde_json::to_string(&self.name).unwrap_or_default();
        let fingerprint = serde_json::to_string(&self.fingerprint).unwrap_or_default();
        format!(
            "[{name},{fingerprint},{},{},{}]",
            self.ungrouped, self.ttl, self.copies
        )
    }
}

impl Fold for SendFold {
    fn capacity(&self) -> usize {
        CAPACITY
    }

    fn accepts(&self, statements: &[&RawValue]) -> bool {
        MemberSend::read(statements).is_some()
    }

    fn fold(&self, members: &[Vec<&RawValue>]) -> Option<Vec<String>> {
        let sends = read_each(members, MemberSend::read)?;
        let first = sends.first()?;
        // One schema check and one clock for the run.
        let alike = sends
            .iter()
            .all(|s| s.schema.get() == first.schema.get() && s.clock.get() == first.clock.get());
        if !alike || sends.len() > CAPACITY {
            return None;
        }
        let members_json: Vec<String> = sends.iter().map(MemberSend::member_json).collect();
        let members_arg = serde_json::to_string(&Value::Text {
            value: format!("[{}]", members_json.join(",")),
        })
        .ok()?;
        let members_arg = RawValue::from_string(members_arg).ok()?;
        let null = RawValue::from_string(r#"{"type":"null"}"#.to_owned()).ok()?;
        let null = &*null;
        let mut insert_args = vec![&*members_arg];
        insert_args.extend(sends.iter().map(|s| s.body));
        insert_args.resize(1 + CAPACITY, null);
        insert_args.push(first.clock);
        Some(vec![
            first.schema.get().to_owned(),
            statement_json(INSERT_FOLDED.sql, insert_args)?,
            statement_json(READ_OUTCOMES.sql, vec![&*members_arg, first.clock])?,
            statement_json(COUNT_SENT.sql, Vec::new())?,
        ])
    }

    fn unfold(
        &self,
        members: &[Vec<&RawValue>],
        results: &[&RawValue],
    ) -> Option<Vec<Vec<String>>> {
        let members = members.len();
        let [schema, inserted, outcomes, counted] = results else {
            return None;
        };
        let inserted = Rows::parse(inserted)?;
        let mut seqs: Vec<(i64, &RawValue)> = inserted
            .rows
            .iter()
            .map(|row| Some((int_cell(row.first()?)?, *row.first()?)))
            .collect::<Option<_>>()?;
        seqs.sort_unstable_by_key(|(seq, _)| *seq);
        let mut counts = vec![0usize; members];
        let outcomes = Rows::parse(outcomes)?;
        let mut own_outcomes: Vec<Vec<Vec<&RawValue>>> = vec![Vec::new(); members];
        for row in &outcomes.rows {
            let (whose, cells) = row.split_first()?;
            if int_cell(cells.first()?) == Some(WRITTEN) {
                let m = usize::try_from(int_cell(whose)?).ok()?;
                *counts.get_mut(m)? = usize::try_from(int_cell(cells.get(1)?)?).ok()?;
                continue;
            }
            match int_cell(whose) {
                Some(m) => own_outcomes
                    .get_mut(usize::try_from(m).ok()?)?
                    .push(cells.to_vec()),
                None => own_outcomes.iter_mut().for_each(|o| o.push(cells.to_vec())),
            }
        }
        if counts.iter().sum::<usize>() != seqs.len() {
            return None;
        }
        let mut next = seqs.iter();
        let mut each = Vec::with_capacity(members);
        for (count, outcome) in counts.into_iter().zip(own_outcomes) {
            let own_seqs = Rows {
                rows: next
                    .by_ref()
                    .take(count)
                    .map(|(_, cell)| vec![*cell])
                    .collect(),
                affected_row_count: count as u64,
            };
            let outcome = Rows {
                rows: outcome,
                affected_row_count: 0,
            };
            each.push(vec![
                schema.get().to_owned(),
                own_seqs.to_json(),
                counted.get().to_owned(),
                outcome.to_json(),
            ]);
        }
        Some(each)
    }

    fn blame(&self, run_step: usize) -> usize {
        // Run: schema, insert, outcomes and counts, count; member: schema,
        // insert, count, outcome.
        match run_step {
            0 => 0,
            1 => 1,
            2 => 3,
            _ => 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(json: serde_json::Value) -> Box<RawValue> {
        RawValue::from_string(json.to_string()).expect("json")
    }

    fn stmt(sql: &str, args: Vec<serde_json::Value>) -> Box<RawValue> {
        raw(serde_json::json!({"sql": sql, "args": args, "want_rows": true}))
    }

    /// A lone Send's statements as the engine writes them, with the
    /// insert's arguments changed by `edit`.
    fn send(edit: impl FnOnce(&mut Vec<serde_json::Value>)) -> Vec<Box<RawValue>> {
        let text = |v: &str| serde_json::json!({"type": "text", "value": v});
        let int = |v: i64| serde_json::json!({"type": "integer", "value": v.to_string()});
        let blob = |b: &str| serde_json::json!({"type": "blob", "base64": b});
        let mut args = vec![text("q"), text("f"), text("[]"), text("[]"), int(0), int(0)];
        args.push(blob("aGk="));
        args.extend((0..15).map(|_| blob("")));
        args.push(serde_json::json!({"type": "null"}));
        edit(&mut args);
        vec![
            stmt(crate::store::SCHEMA_CHECK.sql, vec![]),
            stmt(INSERT_MESSAGES.sql, args),
            stmt(COUNT_SENT.sql, vec![]),
            stmt(READ_OUTCOME.sql, vec![]),
        ]
    }

    fn accepted(statements: &[Box<RawValue>]) -> bool {
        let refs: Vec<&RawValue> = statements.iter().map(|s| &**s).collect();
        SendFold.accepts(&refs)
    }

    /// A failed run statement is answered on the member statement it
    /// stands for: the schema check on the schema check, the insert on the
    /// insert, the outcome read (which also counts what the insert wrote)
    /// on the outcome read, the sent total on the sent total. No statement
    /// of a Send run is a gate: a failure is the run's error, never
    /// "nothing to do".
    #[test]
    fn each_run_statement_blames_the_member_statement_it_stands_for() {
        let members = [
            send(|_| {}),
            send(|a| a[0] = serde_json::json!({"type": "text", "value": "r"})),
        ];
        let members: Vec<Vec<&RawValue>> = members
            .iter()
            .map(|m| m.iter().map(|s| &**s).collect())
            .collect();
        let run = SendFold.fold(&members).expect("a run");
        fn stands_for(run_sql: &str) -> &str {
            match run_sql {
                s if s == INSERT_FOLDED.sql => INSERT_MESSAGES.sql,
                s if s == READ_OUTCOMES.sql => READ_OUTCOME.sql,
                s => s,
            }
        }
        assert_eq!(run.len(), 4);
        for (step, text) in run.iter().enumerate() {
            let ran = SentStatement::parse(&RawValue::from_string(text.clone()).expect("json"))
                .expect("statement")
                .sql
                .into_owned();
            let own = SentStatement::parse(members[1][SendFold.blame(step)]).expect("own");
            assert_eq!(own.sql, stands_for(&ran), "run statement {step}");
        }
        assert_eq!(SendFold.gate(), None);
    }

    /// Only a lone Send of exactly the engine's shape folds: each of its
    /// four statements by its text, the insert by its argument count, its
    /// one body blob and its immediate (unscheduled) visibility.
    #[test]
    fn only_a_send_of_the_engines_shape_folds() {
        assert!(accepted(&send(|_| {})));
        for at in 0..4 {
            let mut other = send(|_| {});
            other[at] = stmt("SELECT 1", vec![]);
            assert!(!accepted(&other), "statement {at} replaced");
        }
        assert!(!accepted(&send(|a| {
            a.pop();
        })));
        assert!(!accepted(&send(
            |a| a[4] = serde_json::json!({"type": "integer", "value": "5"})
        )));
        assert!(!accepted(&send(
            |a| a[9] = serde_json::json!({"type": "blob", "base64": "aGk="})
        )));
        assert!(!accepted(&send(
            |a| a[6] = serde_json::json!({"type": "text", "value": "hi"})
        )));
        assert!(!accepted(&send(|_| {})[..3]));
    }
}
