//! Receives that meet in a batch, folded (docs/engine.md#folding): the plain
//! peek-lock Receives of one queue (no receive attempt id, not waiting)
//! share one claim head, one gated housekeeping pass and one claim walk instead
//! of a savepoint and four statements each.
//!
//! Each keeps its own answer: the walk deals the queue's claimable messages
//! out in seq order, member after member, each up to its own `max_messages`
//! and body budget, exactly as the members would have claimed one after
//! another (docs/semantics.md#receive). In peek-lock a claimed message is
//! locked, so whatever an earlier member claimed blocks for a later one
//! exactly what the walk's rules skip: the rest of a picked group, and in
//! strict_fifo every later message (one message per run, as one per claim).
//! Each picked row takes its lock token from its own member's draw, so the
//! rows are handed back by token.

use std::collections::HashMap;

use const_format::str_replace;
use serde_json::value::RawValue;

use super::maintenance::{ONE_QUEUE, ONE_QUEUE_DUE};
use super::receive::{leased_columns, CLAIM, CLAIM_HEAD, CLAIM_ONE, STRICT_BLOCKED};
use crate::store::fold::{
    int_cell, read_each, statement_json, text_cell, Fold, Rows, SentStatement,
};
use crate::store::hrana::Value;
use crate::store::Statement;

/// Whether the walk's member `p.m` has what it may take: its
/// `max_messages`, or its body budget crossed (the crossing message
/// included, as alone).
const MEMBER_FULL: &str = "(p.k >= p.cap OR p.bytes >= p.budget)";

/// Every member's claim in one walk: [`super::receive::CLAIM_TEMPLATE`]'s
/// peek-lock rules (a picked group is done; strict_fifo picks one message),
/// its picks dealt to member `m` (`?2`: `[[max_messages, body budget], …]`,
/// `?4` of them) until it is full, then to the next. Pick `k` of member `m`
/// takes token `k` of the member's own draw (`?3`: an array of each member's
/// token array). `?1` queue.
pub(super) const CLAIM_FOLDED: Statement = crate::statement!(str_replace!(
    str_replace!(
        concat!(
            "\
WITH RECURSIVE
mode(strict) AS (SELECT ordering_mode = 'strict_fifo' FROM queues WHERE name = ?1),
pick(n, m, k, cap, budget, id, bytes) AS (
  SELECT 0, 0, 0, ?2 ->> '$[0][0]', ?2 ->> '$[0][1]', 0, 0 FROM mode
  UNION ALL
  SELECT p.n + 1,
    CASE WHEN MEMBER_FULL THEN p.m + 1 ELSE p.m END,
    CASE WHEN MEMBER_FULL THEN 1 ELSE p.k + 1 END,
    CASE WHEN MEMBER_FULL THEN ?2 ->> ('$[' || (p.m + 1) || '][0]') ELSE p.cap END,
    CASE WHEN MEMBER_FULL THEN ?2 ->> ('$[' || (p.m + 1) || '][1]') ELSE p.budget END,
    c.id,
    CASE WHEN MEMBER_FULL THEN length(c.body) ELSE p.bytes + length(c.body) END
  FROM pick p, mode JOIN messages c ON c.id = (SELECT min(next) FROM (
    SELECT (SELECT m.id FROM messages m INDEXED BY messages_ungrouped_active
            WHERE m.queue = ?1 AND m.state = 'active' AND m.group_id IS NULL AND m.id > p.id
              AND (m.expires_at = 0 OR m.expires_at > {now})
            ORDER BY m.id LIMIT 1) AS next
    UNION ALL
    SELECT CASE WHEN mode.strict THEN
      (SELECT m.id FROM messages m INDEXED BY messages_by_state
       WHERE m.queue = ?1 AND m.state = 'active' AND m.group_id IS NOT NULL AND m.id > p.id
         AND (m.expires_at = 0 OR m.expires_at > {now})
       ORDER BY m.id LIMIT 1)
    ELSE
      (SELECT h.head_id FROM group_heads h INDEXED BY group_heads_by_head
       CROSS JOIN messages m ON m.id = h.head_id
       WHERE h.queue = ?1 AND h.head_id > p.id AND m.state = 'active'
         AND (m.expires_at = 0 OR m.expires_at > {now})
       ORDER BY h.head_id LIMIT 1)
    END))
  WHERE (NOT MEMBER_FULL OR p.m + 1 < ?4)
    AND NOT (mode.strict AND (p.n >= 1 OR STRICT_BLOCKED))
),
picked AS MATERIALIZED (SELECT m, k - 1 AS k, id FROM pick WHERE n > 0)
UPDATE messages SET
  state = 'locked',
  delivery_count = delivery_count + 1,
  lock_token = ?3 ->> ('$[' || picked.m || '][' || picked.k || ']'),
  locked_until = {now} + (SELECT lock_duration_ms FROM queues WHERE name = ?1)
FROM picked WHERE messages.id = picked.id
RETURNING ",
            leased_columns!("messages.")
        ),
        "MEMBER_FULL",
        MEMBER_FULL
    ),
    "STRICT_BLOCKED",
    STRICT_BLOCKED
));

/// The most Receives one run serves.
const CAPACITY: usize = 64;

/// Column of the lock token in a claim's rows.
const TOKEN_COLUMN: usize = 2;

/// The engine's fold of plain peek-lock Receives.
pub struct ReceiveFold;

/// A member Receive's statements, as `Engine::claim_once` writes them for a
/// peek-lock claim without an attempt id that will not park: the claim
/// head, the housekeeping gate and its statement, the claim.
struct MemberReceive<'a> {
    queue: String,
    max_messages: i64,
    budget: i64,
    /// Its lock tokens, as the JSON array it bound, and read.
    tokens_json: String,
    tokens: Vec<String>,
    clock: &'a RawValue,
}

impl<'a> MemberReceive<'a> {
    fn read(statements: &[&'a RawValue]) -> Option<Self> {
        let [head, gate, housekeeping, claim] = statements else {
            return None;
        };
        let head = SentStatement::parse(head)?;
        let gate = SentStatement::parse(gate)?;
        let housekeeping = SentStatement::parse(housekeeping)?;
        let claim = SentStatement::parse(claim)?;
        let shaped = head.sql == CLAIM_HEAD.sql
            && gate.sql == ONE_QUEUE_DUE.sql
            && housekeeping.sql == ONE_QUEUE.sql
            && head.args.len() == 3
            && gate.args.len() == 2
            && housekeeping.args.len() == 2;
        if !shaped {
            return None;
        }
        let text = text_cell;
        let queue_arg = head.args[0].get();
        let clock = head.args[2];
        let one_queue = [&gate, &housekeeping]
            .iter()
            .all(|s| s.args[0].get() == queue_arg && s.args[1].get() == clock.get());
        if !one_queue || !text(head.args[1])?.is_empty() {
            return None;
        }
        // (queue, attempt, tokens, clock) for one message; (queue, max,
        // picked group goes on, budget, attempt, tokens, clock) for more.
        let (max_messages, budget, attempt, tokens, claim_clock) =
            if claim.sql == CLAIM_ONE.sql && claim.args.len() == 4 {
                (1, i64::MAX, claim.args[1], claim.args[2], claim.args[3])
            } else if claim.sql == CLAIM.sql && claim.args.len() == 7 {
                if int_cell(claim.args[2])? != 0 {
                    return None;
                }
                (
                    int_cell(claim.args[1])?,
                    int_cell(claim.args[3])?,
                    claim.args[4],
                    claim.args[5],
                    claim.args[6],
                )
            } else {
                return None;
            };
        let tokens_json = text(tokens)?;
        let tokens: Vec<String> = serde_json::from_str(&tokens_json).ok()?;
        let sound = claim.args[0].get() == queue_arg
            && claim_clock.get() == clock.get()
            && text(attempt)?.is_empty()
            && max_messages >= 1
            && budget >= 1
            && tokens.len() == usize::try_from(max_messages).ok()?;
        let queue = text(head.args[0])?;
        sound.then_some(MemberReceive {
            queue,
            max_messages,
            budget,
            tokens_json,
            tokens,
            clock,
        })
    }
}

/// A bound text value.
fn text_arg(value: String) -> Option<Box<RawValue>> {
    RawValue::from_string(serde_json::to_string(&Value::Text { value }).ok()?).ok()
}

impl Fold for ReceiveFold {
    fn capacity(&self) -> usize {
        CAPACITY
    }

    fn accepts(&self, statements: &[&RawValue]) -> bool {
        MemberReceive::read(statements).is_some()
    }

    fn fold(&self, members: &[Vec<&RawValue>]) -> Option<Vec<String>> {
        let receives = read_each(members, MemberReceive::read)?;
        let first = receives.first()?;
        // One queue's claims deal out one queue's messages.
        let alike = receives
            .iter()
            .all(|r| r.queue == first.queue && r.clock.get() == first.clock.get());
        if !alike {
            return None;
        }
        let limits: Vec<[i64; 2]> = receives
            .iter()
            .map(|r| [r.max_messages, r.budget])
            .collect();
        let tokens: Vec<&str> = receives.iter().map(|r| r.tokens_json.as_str()).collect();
        let queue = text_arg(first.queue.clone())?;
        let empty = text_arg(String::new())?;
        let limits = text_arg(serde_json::to_string(&limits).ok()?)?;
        let tokens = text_arg(format!("[{}]", tokens.join(",")))?;
        let count = RawValue::from_string(
            serde_json::to_string(&Value::Integer {
                value: i64::try_from(receives.len()).ok()?,
            })
            .ok()?,
        )
        .ok()?;
        Some(vec![
            statement_json(CLAIM_HEAD.sql, vec![&queue, &empty, first.clock])?,
            statement_json(ONE_QUEUE_DUE.sql, vec![&queue, first.clock])?,
            statement_json(ONE_QUEUE.sql, vec![&queue, first.clock])?,
            statement_json(
                CLAIM_FOLDED.sql,
                vec![&queue, &limits, &tokens, &count, first.clock],
            )?,
        ])
    }

    fn unfold(
        &self,
        members: &[Vec<&RawValue>],
        results: &[&RawValue],
    ) -> Option<Vec<Vec<String>>> {
        let receives = read_each(members, MemberReceive::read)?;
        // The gate's result is each member's own passed gate below; when
        // it found nothing due, the housekeeping reads as no rows.
        let [head, _gate, housekeeping, claimed] = results else {
            return None;
        };
        let head = Rows::parse(head)?;
        let housekeeping = Rows::parse(housekeeping)?;
        let claimed = Rows::parse(claimed)?;
        let whose: HashMap<&str, usize> = receives
            .iter()
            .enumerate()
            .flat_map(|(i, r)| r.tokens.iter().map(move |t| (t.as_str(), i)))
            .collect();
        let mut own_claimed = vec![Vec::new(); receives.len()];
        for row in &claimed.rows {
            let token = text_cell(row.get(TOKEN_COLUMN)?)?;
            own_claimed
                .get_mut(*whose.get(token.as_str())?)?
                .push(row.clone());
        }
        // The gate passed for each (what it would have answered when
        // something was due; when nothing was, a housekeeping that changed
        // nothing answers the same); the housekeeping did its work for the
        // first, and found nothing left for the others, as one after another.
        let passed = text_arg("0".into())?;
        let gate = Rows {
            rows: vec![vec![&*passed]],
            affected_row_count: 0,
        }
        .to_json();
        let nothing = Rows::default().to_json();
        let head = head.to_json();
        let first_housekeeping = housekeeping.to_json();
        Some(
            own_claimed
                .into_iter()
                .enumerate()
                .map(|(i, rows)| {
                    let claimed = Rows {
                        affected_row_count: rows.len() as u64,
                        rows,
                    };
                    let housekeeping = if i == 0 {
                        first_housekeeping.clone()
                    } else {
                        nothing.clone()
                    };
                    vec![head.clone(), gate.clone(), housekeeping, claimed.to_json()]
                })
                .collect(),
        )
    }

    fn blame(&self, run_step: usize) -> usize {
        // Head, gate, housekeeping, claim: a member's own four.
        run_step.min(3)
    }

    fn gate(&self) -> Option<usize> {
        // Housekeeping only when something is due: on a quiet queue the
        // run reads three index heads instead of compiling the
        // housekeeping statement (docs/bench.md, "A fold's gate; the
        // outcome and count in one statement").
        Some(1)
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

    fn int(v: i64) -> serde_json::Value {
        json!({"type": "integer", "value": v.to_string()})
    }

    const NULL: serde_json::Value = serde_json::Value::Null;

    /// A lone Receive's statements as `claim_once` writes them: `claim`
    /// is the claim's arguments (the clock, null, appended).
    fn receive(queue: &str, claim_sql: &str, claim: &[serde_json::Value]) -> Vec<Box<RawValue>> {
        let clock = json!({"type": "null"});
        let mut claim = claim.to_vec();
        claim.push(clock.clone());
        vec![
            stmt(CLAIM_HEAD.sql, &[text(queue), text(""), clock.clone()]),
            stmt(ONE_QUEUE_DUE.sql, &[text(queue), clock.clone()]),
            stmt(ONE_QUEUE.sql, &[text(queue), clock]),
            stmt(claim_sql, &claim),
        ]
    }

    fn one(queue: &str) -> Vec<Box<RawValue>> {
        receive(
            queue,
            CLAIM_ONE.sql,
            &[text(queue), text(""), text(r#"["t"]"#)],
        )
    }

    fn several(queue: &str, max: i64, tokens: &str) -> Vec<Box<RawValue>> {
        let args = [
            text(queue),
            int(max),
            int(0),
            int(100),
            text(""),
            text(tokens),
        ];
        receive(queue, CLAIM.sql, &args)
    }

    fn accepted(statements: &[Box<RawValue>]) -> bool {
        let refs: Vec<&RawValue> = statements.iter().map(|s| &**s).collect();
        ReceiveFold.accepts(&refs)
    }

    /// Only a plain peek-lock Receive of exactly the engine's shape folds:
    /// its four statements by their texts, one queue and clock throughout,
    /// no receive attempt id, as many tokens as messages it may take.
    #[test]
    fn only_a_plain_peek_lock_receive_folds() {
        assert!(accepted(&one("q")));
        assert!(accepted(&several("q", 2, r#"["t","u"]"#)));
        // Any statement replaced, keeping its arguments.
        let replaced = |statements: &[Box<RawValue>], at: usize| {
            let sent = SentStatement::parse(&statements[at]).expect("statement");
            let args: Vec<serde_json::Value> = sent
                .args
                .iter()
                .map(|a| serde_json::from_str(a.get()).expect("json"))
                .collect();
            let mut other: Vec<Box<RawValue>> = statements.to_vec();
            other[at] = stmt("SELECT 1", &args);
            other
        };
        for at in 0..4 {
            assert!(
                !accepted(&replaced(&one("q"), at)),
                "statement {at} replaced"
            );
            let walk = several("q", 2, r#"["t","u"]"#);
            assert!(
                !accepted(&replaced(&walk, at)),
                "statement {at} of a walk replaced"
            );
        }
        // Another queue in any statement.
        for at in 0..4 {
            let mut other = one("q");
            let mut elsewhere = one("r");
            other[at] = elsewhere.remove(at);
            assert!(!accepted(&other), "statement {at} on another queue");
        }
        // A receive attempt id, in the head or the claim.
        let mut attempt = one("q");
        attempt[0] = stmt(CLAIM_HEAD.sql, &[text("q"), text("a"), NULL]);
        assert!(!accepted(&attempt), "an attempt id in the head");
        let claim = [text("q"), text("a"), text(r#"["t"]"#)];
        assert!(
            !accepted(&receive("q", CLAIM_ONE.sql, &claim)),
            "an attempt id"
        );
        // A walk whose picked groups go on (receive-and-delete's rule), or
        // with fewer tokens than messages.
        let args = [
            text("q"),
            int(2),
            int(1),
            int(100),
            text(""),
            text(r#"["t","u"]"#),
        ];
        assert!(!accepted(&receive("q", CLAIM.sql, &args)), "groups go on");
        assert!(!accepted(&several("q", 2, r#"["t"]"#)), "one token for two");
        // An injected clock that differs between statements.
        let mut clocked = one("q");
        clocked[1] = stmt(ONE_QUEUE_DUE.sql, &[text("q"), int(5)]);
        assert!(!accepted(&clocked), "two clocks");
    }

    fn refs(members: &[Vec<Box<RawValue>>]) -> Vec<Vec<&RawValue>> {
        members
            .iter()
            .map(|m| m.iter().map(|s| &**s).collect())
            .collect()
    }

    /// Receives of two queues do not fold: one walk deals out one queue.
    #[test]
    fn a_run_over_two_queues_declines() {
        let members = vec![one("q"), one("r")];
        assert!(ReceiveFold.fold(&refs(&members)).is_none());
        let members = vec![one("q"), several("q", 2, r#"["t","u"]"#)];
        let run = ReceiveFold.fold(&refs(&members)).expect("a run");
        assert_eq!(run.len(), 4);
        assert!(
            run[3].contains(r#"[[1,9223372036854775807],[2,100]]"#),
            "{}",
            run[3]
        );
        assert!(run[3].contains(r#"[[\"t\"],[\"t\",\"u\"]]"#), "{}", run[3]);
    }

    /// A failed run statement is answered on the member statement it stands
    /// for: the head on the head, the gate on the gate, the housekeeping on
    /// the housekeeping, the walk on the claim; the gate, whose failure
    /// means "nothing due", is the run's only gate.
    #[test]
    fn each_run_statement_blames_the_member_statement_it_stands_for() {
        let members = vec![one("q"), several("q", 2, r#"["t","u"]"#)];
        let run = ReceiveFold.fold(&refs(&members)).expect("a run");
        let sql = |text: &str| {
            let v: serde_json::Value = serde_json::from_str(text).expect("json");
            v["sql"].as_str().expect("sql").to_owned()
        };
        for member in &members {
            for step in 0..3 {
                let own = SentStatement::parse(&member[ReceiveFold.blame(step)]).expect("own");
                assert_eq!(own.sql, sql(&run[step]), "run statement {step}");
            }
            let claim = SentStatement::parse(&member[ReceiveFold.blame(3)]).expect("own");
            assert!(claim.sql == CLAIM_ONE.sql || claim.sql == CLAIM.sql);
        }
        assert_eq!(sql(&run[1]), ONE_QUEUE_DUE.sql);
        assert_eq!(ReceiveFold.gate(), Some(1));
        assert_eq!(sql(&run[3]), CLAIM_FOLDED.sql);
    }

    /// Each claimed row goes to the member whose token it carries; a row
    /// with a token of none of them makes the run's answer not add up.
    #[test]
    fn claimed_rows_go_back_by_token() {
        let members = vec![one("q"), several("q", 2, r#"["u","v"]"#)];
        let members = refs(&members);
        let row = |seq: i64, token: &str| {
            let mut cells = vec![int(seq)];
            cells.extend(std::iter::repeat_n(NULL, TOKEN_COLUMN - 1));
            cells.push(text(token));
            cells
        };
        let head = json!({"rows": [[text("0"), int(1), NULL, int(7), int(9)]]}).to_string();
        let gate = json!({"rows": [[text("0")]]}).to_string();
        let housekeeping = json!({"rows": [[text("active")]], "affected_row_count": 1}).to_string();
        let claimed = |rows: Vec<Vec<serde_json::Value>>| {
            json!({"rows": rows, "affected_row_count": rows.len()}).to_string()
        };
        let unfold = |claimed: String| {
            let results: Vec<Box<RawValue>> =
                [head.clone(), gate.clone(), housekeeping.clone(), claimed]
                    .into_iter()
                    .map(|r| RawValue::from_string(r).expect("json"))
                    .collect();
            let results: Vec<&RawValue> = results.iter().map(|r| &**r).collect();
            ReceiveFold.unfold(&members, &results)
        };
        let each = unfold(claimed(vec![row(1, "v"), row(2, "t"), row(3, "u")])).expect("answers");
        assert_eq!(each.len(), 2);
        let rows = |text: &str| {
            let rows: serde_json::Value = serde_json::from_str(text).expect("json");
            rows["rows"]
                .as_array()
                .expect("rows")
                .iter()
                .map(|r| r[0]["value"].as_str().unwrap_or_default().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(rows(&each[0][3]), ["2"]);
        assert_eq!(rows(&each[1][3]), ["1", "3"]);
        // The housekeeping's rows are the first member's; the head is each's.
        assert_eq!(rows(&each[0][2]), ["active"]);
        assert!(rows(&each[1][2]).is_empty());
        assert_eq!(each[0][0], each[1][0]);
        assert!(unfold(claimed(vec![row(1, "w")])).is_none());
    }

    /// When the run's gate found nothing due, the gate and the housekeeping
    /// read as no rows (the store's reading of a gated statement it
    /// skipped), and each member is told its gate passed and its
    /// housekeeping changed nothing: what a lone Receive's skipped
    /// housekeeping comes to.
    #[test]
    fn nothing_due_reads_as_a_housekeeping_that_changed_nothing() {
        let members = vec![one("q"), several("q", 2, r#"["u","v"]"#)];
        let members = refs(&members);
        let head = json!({"rows": [[text("0"), int(1), NULL, int(7), int(9)]]}).to_string();
        let none = Rows::default().to_json();
        let results: Vec<Box<RawValue>> = [head, none.clone(), none.clone(), none.clone()]
            .into_iter()
            .map(|r| RawValue::from_string(r).expect("json"))
            .collect();
        let results: Vec<&RawValue> = results.iter().map(|r| &**r).collect();
        let each = ReceiveFold.unfold(&members, &results).expect("answers");
        for own in &each {
            let gate: serde_json::Value = serde_json::from_str(&own[1]).expect("json");
            assert_eq!(gate["rows"][0][0]["value"], "0", "{}", own[1]);
            assert_eq!(own[2], none);
            assert_eq!(own[3], none);
        }
    }
}
