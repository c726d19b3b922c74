//! Conditional reads: whether a message contains a condition, as jsonb's
//! `@>` decides it (pgmq's `read(..., conditional)`), in one constant SQL
//! expression evaluated inside the claim statement.
//!
//! `@>` is a search, not a path lookup: an object contains an object when
//! every key of the condition is in the target with a value that contains
//! the condition's; an array contains an array when every element of the
//! condition is contained in *some* element of the target (one element
//! may serve several); scalars are equal by type and value, numbers by
//! numeric value (`1` and `1.0` are equal). A container never contains a
//! scalar nor the other kind of container. Because an array element is a
//! choice, the expression is a recursive search over states: each state
//! is the JSON array of `[condition, target]` pairs still to prove, the
//! first pair is taken apart each step (an array pair branches into one
//! state per target element), and the target contains the condition
//! exactly when some state runs out of pairs. A dead end yields no state.
//!
//! Before the search, one pass over the condition's top-level keys rejects
//! most rows cheaply (each key present, each scalar equal): the first step
//! of the search itself, without its recursion, since a conditional read
//! tests every row its walk passes over (docs/bench.md: about a quarter of
//! the search's cost per rejected row).
//!
//! A body that is not JSON contains nothing. Numbers are compared as
//! SQLite reads them (integers beyond 64 bits as reals), and a key that
//! appears twice in a message or a condition is not folded to its last
//! occurrence as jsonb folds it (docs/deviations.md).

/// The pre-check and the search with `JSON_TARGET` (the message's JSON
/// text) and `JSON_CONDITION` (the condition's) still to fill in; `CONDV`,
/// `TARGV` and `TAILV` are the current state's first pair and its other
/// pairs. `CASE` decides the order: the search runs only on rows the
/// pre-check passes.
const TEMPLATE: &str = "CASE WHEN json_valid(JSON_TARGET) AND NOT EXISTS (
    SELECT 1 FROM json_each(JSON_CONDITION) k
    WHERE json_type(JSON_TARGET, k.fullkey) IS NULL
      OR (k.type NOT IN ('object', 'array') AND NOT (
        replace(k.type, 'integer', 'real') = replace(json_type(JSON_TARGET, k.fullkey), 'integer', 'real')
        AND (k.type IN ('true', 'false', 'null') OR k.atom = (JSON_TARGET ->> k.fullkey)))))
THEN EXISTS (WITH RECURSIVE todo(rest) AS (
  SELECT json_array(json_array(json(JSON_CONDITION), json(JSON_TARGET)))
  UNION ALL
  SELECT next.value FROM todo, json_each(CASE json_type(CONDV)
    WHEN 'object' THEN CASE WHEN json_type(TARGV) = 'object'
        AND NOT EXISTS (SELECT 1 FROM json_each(CONDV) k WHERE json_type(TARGV, k.fullkey) IS NULL)
      THEN json_array(json((SELECT json_group_array(json(v)) FROM (
        SELECT value AS v FROM json_each(TAILV)
        UNION ALL
        SELECT json_array(json(CONDV -> k.fullkey), json(TARGV -> k.fullkey)) FROM json_each(CONDV) k))))
      ELSE '[]' END
    WHEN 'array' THEN CASE
      WHEN json_type(TARGV) <> 'array' THEN '[]'
      WHEN json_array_length(CONDV) = 0 THEN json_array(json(TAILV))
      ELSE (SELECT json_group_array(json(json_insert(TAILV,
          '$[#]', json_array(json(CONDV -> '$[0]'), json(TARGV -> e.fullkey)),
          '$[#]', json_array(json(json_remove(CONDV, '$[0]')), json(TARGV)))))
        FROM json_each(TARGV) e)
      END
    ELSE CASE WHEN replace(json_type(CONDV), 'integer', 'real') = replace(json_type(TARGV), 'integer', 'real')
        AND (json_type(CONDV) IN ('true', 'false', 'null') OR (CONDV ->> '$') = (TARGV ->> '$'))
      THEN json_array(json(TAILV)) ELSE '[]' END
    END) next
  WHERE todo.rest <> '[]')
SELECT 1 FROM todo WHERE rest = '[]') ELSE 0 END";

/// [`TEMPLATE`] with its state accessors in place.
const SEARCH: &str = const_format::str_replace!(
    const_format::str_replace!(
        const_format::str_replace!(TEMPLATE, "CONDV", "(todo.rest -> '$[0][0]')"),
        "TARGV",
        "(todo.rest -> '$[0][1]')"
    ),
    "TAILV",
    "json_remove(todo.rest, '$[0]')"
);

/// Whether candidate `m`'s body contains the condition `?8`.
pub(super) const BODY_CONTAINS_CONDITION: &str = const_format::str_replace!(
    const_format::str_replace!(SEARCH, "JSON_TARGET", "CAST(m.body AS TEXT)"),
    "JSON_CONDITION",
    "?8"
);

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{json, Value};

    use crate::engine::plans::Local;
    use crate::store::{Program, Statement, Store};

    /// jsonb's `@>` for a condition inside a document (the reference the
    /// SQL is tested against; PostgreSQL's `JsonbDeepContains`).
    fn contains(target: &Value, condition: &Value) -> bool {
        match (target, condition) {
            (Value::Object(t), Value::Object(c)) => c
                .iter()
                .all(|(k, cv)| t.get(k).is_some_and(|tv| contains(tv, cv))),
            (Value::Array(t), Value::Array(c)) => {
                c.iter().all(|cv| t.iter().any(|tv| contains(tv, cv)))
            }
            (Value::Number(t), Value::Number(c)) => t.as_f64() == c.as_f64(),
            (Value::Object(_) | Value::Array(_), _) | (_, Value::Object(_) | Value::Array(_)) => {
                false
            }
            (t, c) => t == c,
        }
    }

    /// The search over a JSON array of `[target, condition]` texts, in
    /// SQLite, each pair's texts correlated from the outer row as the
    /// claim's `m.body` is: a JSON array of 0/1 answers, in order.
    const PAIRS: Statement = crate::statement!(const_format::concatcp!(
        "SELECT json_group_array(",
        const_format::str_replace!(
            const_format::str_replace!(super::SEARCH, "JSON_TARGET", "(p.value ->> 0)"),
            "JSON_CONDITION",
            "(p.value ->> 1)"
        ),
        ") FROM (SELECT value FROM json_each(?1) ORDER BY CAST(key AS INTEGER)) p"
    ));

    fn sql_contains(store: &Store<Local>, pairs: &[(String, String)]) -> Vec<bool> {
        let mut program = Program::read();
        let texts = serde_json::to_string(pairs).expect("pairs encode");
        let step = program.step(&PAIRS, vec![texts.into()]);
        let committed = pollster::block_on(store.run(&program)).expect("search runs");
        let row = committed.first_row(step).expect("one row");
        let answers: Vec<i64> =
            serde_json::from_str(row.text(0).expect("a JSON array")).expect("answers decode");
        answers.into_iter().map(|a| a == 1).collect()
    }

    fn store() -> (Store<Local>, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "mqlite-contains-{}-{}",
            std::process::id(),
            crate::engine::random_hex(8).unwrap_or_default()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let db = mqlite_libsql::Database::open(dir.join("c.db"), None).expect("database");
        (Store::new(Local(Arc::new(db))), dir)
    }

    /// Hand-picked cases with the answer PostgreSQL gives, then every
    /// pair of a generated family, SQL against the reference.
    #[test]
    fn the_search_decides_containment_as_jsonb() {
        let (store, dir) = store();
        let known = [
            (json!({"k":"a","n":1}), json!({"k":"a"}), true),
            (json!({"k":"a"}), json!({"k":"b"}), false),
            (json!({"k":"a"}), json!({"j":"a"}), false),
            (json!({"n":1}), json!({"n":1.0}), true),
            (json!({"n":1}), json!({"n":"1"}), false),
            (
                json!({"a":{"b":{"c":[1,2,{"d":true}]}}}),
                json!({"a":{"b":{"c":[{"d":true}]}}}),
                true,
            ),
            (
                json!({"a":{"b":{"c":[1,2,{"d":true}]}}}),
                json!({"a":{"b":{"c":[{"d":false}]}}}),
                false,
            ),
            (json!({"a":[1,2,3]}), json!({"a":[3,1,1]}), true),
            (json!({"a":[1,2,3]}), json!({"a":[]}), true),
            (json!({"a":[1,2,3]}), json!({"a":1}), false),
            (json!({"a":1}), json!({"a":[1]}), false),
            (
                json!({"a":[{"x":1,"y":2},{"x":3}]}),
                json!({"a":[{"x":1,"y":2}]}),
                true,
            ),
            (
                json!({"a":[{"x":1},{"y":2}]}),
                json!({"a":[{"x":1,"y":2}]}),
                false,
            ),
            (json!({"a":[[1,2],[3]]}), json!({"a":[[2],[3]]}), true),
            (json!({"a":[[1,2],[3]]}), json!({"a":[[2,3]]}), false),
            (json!({"a":null}), json!({"a":null}), true),
            (json!({"a":false}), json!({"a":null}), false),
            (json!({"a":{}}), json!({"a":{}}), true),
            (json!({"a":[]}), json!({"a":{}}), false),
            (
                json!({"a.b":1,"c d":{"\"e":2}}),
                json!({"a.b":1,"c d":{"\"e":2}}),
                true,
            ),
            (json!({"s":"ü ✓"}), json!({"s":"\u{fc} \u{2713}"}), true),
            (json!([{"a":1}]), json!({"a":1}), false),
        ];
        let pairs: Vec<(String, String)> = known
            .iter()
            .map(|(t, c, _)| (t.to_string(), c.to_string()))
            .chain([
                ("not json".to_owned(), r#"{"a":1}"#.to_owned()),
                (r#"{"a":1.50e0}"#.to_owned(), r#"{"a":1.5}"#.to_owned()),
            ])
            .collect();
        let got = sql_contains(&store, &pairs);
        for ((target, condition, expected), got) in known.iter().zip(&got) {
            assert_eq!(
                contains(target, condition),
                *expected,
                "{target} @> {condition}"
            );
            assert_eq!(got, expected, "SQL: {target} @> {condition}");
        }
        assert_eq!(got[known.len()..], [false, true], "not JSON; 1.50e0 = 1.5");

        let leaves = [json!(1), json!(2.0), json!("x"), json!(true), json!(null)];
        let mut values: Vec<Value> = leaves.to_vec();
        for a in &leaves {
            values.push(json!([a]));
            values.push(json!({"k": a}));
            for b in &leaves {
                values.push(json!([a, b]));
                values.push(json!({"k": a, "j": [b]}));
                values.push(json!([{"k": a}, [b]]));
            }
        }
        let family: Vec<(Value, Value)> = values
            .iter()
            .flat_map(|t| {
                values
                    .iter()
                    .map(move |c| (json!({"v": t}), json!({"v": c})))
            })
            .collect();
        let pairs: Vec<(String, String)> = family
            .iter()
            .map(|(t, c)| (t.to_string(), c.to_string()))
            .collect();
        let got = sql_contains(&store, &pairs);
        assert_eq!(got.len(), family.len());
        for ((target, condition), got) in family.iter().zip(got) {
            assert_eq!(got, contains(target, condition), "{target} @> {condition}");
        }
        let matched = family.iter().filter(|(t, c)| contains(t, c)).count();
        assert!(
            family.len() > 5000 && matched > 200 && matched < family.len() / 2,
            "{} pairs, {matched} contained",
            family.len()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
