//! Filter tests, named by conformance case (`cNNN_…`) or by the part of
//! docs/semantics.md#filters they pin down.

use super::*;

/// An owned message to build [`FilterInput`]s from.
#[derive(Clone, Default)]
struct Msg {
    subject: String,
    group_id: String,
    correlation_id: String,
    reply_to: String,
    message_id: String,
    content_type: String,
    properties: BTreeMap<String, String>,
    body: Vec<u8>,
    enqueued_at_ms: i64,
    visible_at_ms: i64,
    now_ms: i64,
}

/// 2024-03-15T10:00:00Z, a Friday.
const E: i64 = 1_710_496_800_000;

impl Msg {
    fn new() -> Msg {
        Msg {
            enqueued_at_ms: E,
            visible_at_ms: E,
            now_ms: E + 60_000,
            ..Msg::default()
        }
    }

    fn subject(mut self, s: &str) -> Msg {
        self.subject = s.to_string();
        self
    }

    fn prop(mut self, k: &str, v: &str) -> Msg {
        self.properties.insert(k.to_string(), v.to_string());
        self
    }

    fn body(mut self, content_type: &str, body: &str) -> Msg {
        self.content_type = content_type.to_string();
        self.body = body.as_bytes().to_vec();
        self
    }

    fn input(&self) -> FilterInput<'_> {
        FilterInput {
            subject: &self.subject,
            group_id: &self.group_id,
            correlation_id: &self.correlation_id,
            reply_to: &self.reply_to,
            message_id: &self.message_id,
            content_type: &self.content_type,
            properties: &self.properties,
            body: &self.body,
            enqueued_at_ms: self.enqueued_at_ms,
            visible_at_ms: self.visible_at_ms,
            now_ms: self.now_ms,
        }
    }
}

fn compile_error(source: &str) -> String {
    match Filter::compile(source) {
        Ok(_) => panic!("{source:?} compiled"),
        Err(CompileError(message)) => message,
    }
}

fn run(source: &str, msg: &Msg) -> Result<bool, String> {
    let filter = Filter::compile(source).unwrap_or_else(|e| panic!("{source:?}: {e}"));
    filter.evaluate(&msg.input())
}

fn assert_true(source: &str, msg: &Msg) {
    assert_eq!(run(source, msg), Ok(true), "{source}");
}

fn assert_false(source: &str, msg: &Msg) {
    assert_eq!(run(source, msg), Ok(false), "{source}");
}

fn assert_runtime_error(source: &str, msg: &Msg) -> String {
    match run(source, msg) {
        Err(message) => {
            assert!(!message.is_empty(), "{source}: empty error");
            message
        }
        other => panic!("{source}: expected a runtime error, got {other:?}"),
    }
}

/// Runs `f` on a thread with a large stack: debug builds use far more stack
/// per level than the optimised wasm these limits are sized for.
fn big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(f)
        .expect("spawns")
        .join()
        .expect("no panic")
}

// ---------------------------------------------------------------------------
// Conformance cases.

#[test]
fn c63_bad_filter_is_a_compile_error() {
    let message = compile_error("subject ==");
    assert!(
        message.starts_with("syntax error at line 1, column 11"),
        "{message}"
    );
}

#[test]
fn c182_subject_prefix() {
    let filter = r#"subject startsWith "payment.""#;
    assert_false(filter, &Msg::new().subject("order.created"));
    assert_true(filter, &Msg::new().subject("payment.captured"));
}

#[test]
fn c183_property_equality() {
    let filter = r#"properties["tier"]=="gold""#;
    assert_false(filter, &Msg::new().prop("tier", "silver"));
    assert_true(filter, &Msg::new().prop("tier", "gold"));
    assert_false(filter, &Msg::new());
}

#[test]
fn c186_fail_closed() {
    let filter = r#"subject_parts[5] == "x""#;
    let message = assert_runtime_error(filter, &Msg::new().subject("orders"));
    assert_eq!(message, "index out of range: 5 (array length is 1)");
    assert_true(filter, &Msg::new().subject("a.b.c.d.e.x"));
}

#[test]
fn c187_body_json_gating() {
    let filter = "body_json.amount > 100";
    assert_true(
        filter,
        &Msg::new().body("application/json", r#"{"amount":150}"#),
    );
    assert_false(
        filter,
        &Msg::new().body("application/json", r#"{"amount":50}"#),
    );
    // Not JSON by content type: body_json is {} and the nil comparison fails.
    assert_runtime_error(filter, &Msg::new().body("text/plain", r#"{"amount":150}"#));
    // Missing member: nil comparison, fail closed; the guard makes it safe.
    assert_runtime_error(filter, &Msg::new().body("application/json", "{}"));
    let guarded = r#""amount" in body_json && body_json.amount > 100"#;
    assert_false(guarded, &Msg::new().body("application/json", "{}"));
    assert_true(
        guarded,
        &Msg::new().body("application/json", r#"{"amount":101}"#),
    );
}

#[test]
fn c187_body_json_content_types_and_shapes() {
    let n = r#"{"n": 1, "s": "x", "a": [1, "b", null], "o": {"k": true}, "z": null}"#;
    let all = r#"body_json.n == 1 && body_json.s == "x" && len(body_json.a) == 3 && body_json.a[2] == nil
        && body_json.o.k && body_json.z == nil && body_json.missing == nil"#;
    assert_true(all, &Msg::new().body("", n));
    assert_true(all, &Msg::new().body("Application/JSON; charset=utf-8", n));
    assert_true(all, &Msg::new().body("application/vnd.api+json", n));
    let empty = "len(body_json) == 0";
    assert_true(empty, &Msg::new().body("text/plain", n));
    assert_true(empty, &Msg::new().body("application/json", "[1, 2]"));
    assert_true(empty, &Msg::new().body("application/json", "{not json"));
    assert_true(empty, &Msg::new().body("application/json", ""));
    // JSON numbers are floats.
    assert_true(
        r#"string(body_json.n) == "1" && body_json.f == 1.5"#,
        &Msg::new().body("", r#"{"n": 1, "f": 1.5}"#),
    );
    assert_true(
        r#"body_json.n / 2 == 0.5"#,
        &Msg::new().body("", r#"{"n": 1}"#),
    );
}

#[test]
fn c188_body_text() {
    let filter = r#"body_text contains "urgent""#;
    assert_true(filter, &Msg::new().body("text/plain", "this is urgent"));
    assert_false(filter, &Msg::new().body("text/plain", "whenever"));
    assert_true(r#"body_text == """#, &Msg::new());
}

#[test]
fn c189_delay_routing() {
    let delayed = "visible_at - enqueued_at > hours(1)";
    let immediate = "visible_at - enqueued_at == seconds(0)";
    let plain = Msg::new();
    assert_false(delayed, &plain);
    assert_true(immediate, &plain);
    let scheduled = Msg {
        visible_at_ms: E + 2 * 3_600_000,
        ..Msg::new()
    };
    assert_true(delayed, &scheduled);
    assert_false(immediate, &scheduled);
}

#[test]
fn c190_c191_recompile_and_match_all() {
    let a = Filter::compile(r#"subject == "a""#).unwrap();
    let b = Filter::compile(r#"subject == "b""#).unwrap();
    let msg = Msg::new().subject("a");
    assert_eq!(a.evaluate(&msg.input()), Ok(true));
    assert_eq!(b.evaluate(&msg.input()), Ok(false));
    for empty in ["", "   ", "\n\t "] {
        let all = Filter::compile(empty).unwrap();
        assert!(all.is_match_all());
        assert_eq!(all.evaluate(&msg.input()), Ok(true));
    }
    assert!(!a.is_match_all());
}

#[test]
fn c195_compile_errors() {
    assert!(compile_error("subject ==").starts_with("syntax error"));
    assert_eq!(compile_error(r#"nope == "x""#), "unknown name nope");
    assert_eq!(
        compile_error("frobnicate(subject)"),
        "unknown function frobnicate"
    );
    assert_eq!(
        compile_error("body_size + 1"),
        "filter must be a boolean expression, but its type is int"
    );
    assert_eq!(
        compile_error("subject"),
        "filter must be a boolean expression, but its type is string"
    );
    let long = format!("subject == \"{}\"", "x".repeat(4084));
    assert_eq!(long.len(), 4097);
    assert_eq!(
        compile_error(&long),
        "expression too long (4097 > 4096 bytes)"
    );
    let limit = format!("subject == \"{}\"", "x".repeat(4083));
    assert_eq!(limit.len(), 4096);
    assert!(Filter::compile(&limit).is_ok());
    // `any` compiles; a non-bool value at run time fails closed.
    let flag = Filter::compile("body_json.flag").unwrap();
    let yes = Msg::new().body("", r#"{"flag": true}"#);
    assert_eq!(flag.evaluate(&yes.input()), Ok(true));
    let text = Msg::new().body("", r#"{"flag": "yes"}"#);
    assert_eq!(
        flag.evaluate(&text.input()),
        Err("filter returned string, not bool".to_string())
    );
}

#[test]
fn c196_environment_coverage() {
    let msg = Msg {
        subject: "orders.eu.new".into(),
        group_id: "g1".into(),
        correlation_id: "c1".into(),
        reply_to: "r1".into(),
        message_id: "m1".into(),
        content_type: "application/json".into(),
        body: b"hello".to_vec(),
        ..Msg::new()
    }
    .prop("tier", "gold")
    .prop("region", "eu");
    for expression in [
        r#"subject_parts[0] == "orders""#,
        "len(subject_parts) == 3",
        r#"subject matches "^orders""#,
        r#""region" in properties"#,
        r#"properties["missing"] == """#,
        r#"not ("missing" in properties)"#,
        "body_size == 5",
        "len(property_keys) == 2",
        r#""tier" in property_keys"#,
        r#"group_id == "g1""#,
        r#"correlation_id == "c1""#,
        r#"reply_to == "r1""#,
        r#"message_id == "m1""#,
        // And the rest of the environment.
        r#"content_type == "application/json""#,
        r#"body_text == "hello""#,
        r#"property_keys == ["region", "tier"]"#,
        "enqueued_at == visible_at",
        "len(body_json) == 0",
    ] {
        assert_true(expression, &msg);
    }
    assert_false(
        r#"properties["tier"] == "silver" || subject_parts[0] == "payments""#,
        &msg,
    );
    assert_true("len(subject_parts) == 0", &Msg::new());
    assert_true(
        r#"subject == "" && len(property_keys) == 0 && len(properties) == 0"#,
        &Msg::new(),
    );
    assert_true(
        r#"subject_parts == ["", "a", ""]"#,
        &Msg::new().subject(".a."),
    );
}

#[test]
fn c200_runtime_error_has_a_message() {
    let message = assert_runtime_error(r#"subject_parts[5] == "x""#, &Msg::new().subject("a"));
    assert!(message.contains("index out of range"), "{message}");
}

#[test]
fn c202_time_fields() {
    let msg = Msg {
        visible_at_ms: E + 7_200_000,
        ..Msg::new()
    };
    assert_true("visible_at - enqueued_at == hours(2)", &msg);
    assert_true("enqueued_at.Hour() == 10", &msg);
    assert_true(
        "enqueued_at.Year() == 2024 && enqueued_at.Month() == 3 && enqueued_at.Day() == 15",
        &msg,
    );
    assert_true(
        "visible_at.Hour() == 12 && visible_at.Minute() == 0 && visible_at.Second() == 0",
        &msg,
    );
    // Decisions #8: plain integers; Friday is 5 (Sunday 0).
    assert_true("enqueued_at.Weekday() == 5", &msg);
    assert_true("enqueued_at.Unix() == 1710496800", &msg);
    assert_true("(visible_at - enqueued_at).Hours() == 2.0", &msg);
    assert_true("(visible_at - enqueued_at).Minutes() == 120.0", &msg);
    assert_true("(visible_at - enqueued_at).Seconds() == 7200.0", &msg);
    assert_true("hours(1).Hours() + minutes(30).Hours() == 1.5", &msg);
    assert_true(
        "enqueued_at + hours(2) == visible_at && visible_at - hours(2) == enqueued_at",
        &msg,
    );
    assert_true("hours(2) + enqueued_at == visible_at", &msg);
    assert_true(
        "enqueued_at < visible_at && visible_at >= enqueued_at && hours(1) < hours(2)",
        &msg,
    );
    assert_true(
        "enqueued_at - visible_at == -hours(2) && hours(1) * 2 == hours(2)",
        &msg,
    );
    // Leap day, before the epoch.
    let leap = Msg {
        enqueued_at_ms: 951_867_015_000,
        visible_at_ms: -1000,
        ..Msg::new()
    };
    assert_true(
        "enqueued_at.Month() == 2 && enqueued_at.Day() == 29 && enqueued_at.Weekday() == 2 \
         && enqueued_at.Hour() == 23 && enqueued_at.Minute() == 30 && enqueued_at.Second() == 15",
        &leap,
    );
    assert_true(
        "visible_at.Year() == 1969 && visible_at.Month() == 12 && visible_at.Day() == 31 \
         && visible_at.Second() == 59 && visible_at.Unix() == -1",
        &leap,
    );
}

/// Case 203: constant `duration()` arguments are parsed at compile time, so
/// an invalid one is a compile error (TestFilter: `valid:false`); a
/// non-constant one is a runtime error.
#[test]
fn c203_duration_helpers() {
    let msg = Msg::new();
    for expression in [
        r#"duration("1w") == days(7)"#,
        r#"duration("1d12h") == hours(36)"#,
        "minutes(60) == hours(1)",
        r#"duration("1.5d") == hours(36)"#,
        r#"duration("1w3d") == days(10)"#,
        r#"duration("90s") == minutes(1) + seconds(30)"#,
        r#"duration("-1h") == -hours(1) && duration("+2m") == minutes(2)"#,
        r#"duration("0") == seconds(0)"#,
        r#"duration("1h30m") == minutes(90) && weeks(1) == days(7) && days(1) == hours(24)"#,
    ] {
        assert_true(expression, &msg);
    }
    for bad in ["1y", "", "1mo", "abc", "1x", "1"] {
        let source = format!("duration({bad:?}) == days(365)");
        assert_eq!(compile_error(&source), format!("invalid duration {bad:?}"));
    }
    let dynamic = r#"duration(properties["d"]) == days(365)"#;
    assert_runtime_error(dynamic, &Msg::new().prop("d", "1y"));
    assert_true(dynamic, &Msg::new().prop("d", "365d"));
    assert_runtime_error(
        "seconds(body_json.n) > seconds(0)",
        &Msg::new().body("", r#"{"n": 1}"#),
    );
    assert_runtime_error("weeks(9223372036854775807) > hours(1)", &msg);
}

#[test]
fn duration_parser() {
    use super::time::parse_duration as p;
    let h = 3_600_000_000_000i64;
    assert_eq!(p("1ns"), Ok(1));
    assert_eq!(p("1us"), Ok(1_000));
    assert_eq!(p("1µs"), Ok(1_000));
    assert_eq!(p("1μs"), Ok(1_000));
    assert_eq!(p("1ms"), Ok(1_000_000));
    assert_eq!(p("1.5h"), Ok(h + h / 2));
    assert_eq!(p(".5s"), Ok(500_000_000));
    assert_eq!(p("1.s"), Ok(1_000_000_000));
    assert_eq!(p("-0"), Ok(0));
    assert_eq!(p("2562047h"), Ok(2_562_047 * h));
    assert_eq!(p("-2562047h47m16.854775808s"), Ok(i64::MIN));
    for bad in [
        "2562048h",
        "9223372036854775808ns",
        ".s",
        "s",
        "1h-1m",
        "+",
        "1.5",
        "1 h",
        "1H",
    ] {
        assert!(p(bad).is_err(), "{bad}");
    }
}

// ---------------------------------------------------------------------------
// Language subset (docs/semantics.md#filters).

#[test]
fn short_circuit() {
    let msg = Msg::new().subject("a");
    assert_false(r#"false && subject_parts[9] == "x""#, &msg);
    assert_true(r#"true || subject_parts[9] == "x""#, &msg);
    assert_false(r#"false and subject_parts[9] == "x""#, &msg);
    assert_true(r#"true or subject_parts[9] == "x""#, &msg);
    assert_runtime_error(r#"subject_parts[9] == "x" && false"#, &msg);
    assert_runtime_error(
        r#"body_json.flag || true"#,
        &Msg::new().body("", r#"{"flag": 1}"#),
    );
}

#[test]
fn operators_and_literals() {
    let msg = Msg::new().subject("orders.eu.new");
    for expression in [
        "7 / 2 == 3.5",
        "7 % 3 == 1",
        "2 ** 3 == 8.0 && 2 ^ 3 == 8",
        "-2 ** 2 == -4",
        "1 + 2 * 3 == 7",
        "(1 + 2) * 3 == 9",
        "+1 == 1",
        "1 < 2.5 && 2.5 > 1 && 2 >= 2 && 2 <= 2",
        r#""a" < "b" && "b" >= "a""#,
        r#""a" + 'b' == "ab""#,
        r#"1 != 2 && "a" != "b""#,
        r#"1 != "1" && nil != 0 && nil == nil"#,
        "1 == 1.0",
        r#"subject in ["x", "orders.eu.new"]"#,
        r#""eu" in subject_parts && "zz" not in subject_parts"#,
        "len(1..3) == 3 && 2 in 1..3 && len(3..1) == 0",
        "[1, 2] == [1, 2] && [] == []",
        r#"subject contains "eu" && subject startsWith "orders" && subject endsWith "new""#,
        "not false && !false",
        "(not true) == false",
        r#"subject == "orders.eu.new" ? true : false"#,
        r#"(subject == "x" ? 1 : 2) == 2"#,
        "if subject_parts[0] == \"orders\" { true } else { false }",
        "let n = len(subject_parts); n == 3 && n > 2",
        "subject_parts[1:] == [\"eu\", \"new\"] && subject_parts[:1] == [\"orders\"]",
        "0x10 == 16 && 1_000 == 1000 && 1e3 == 1000.0 && .5 == 0.5",
        "16 == 0x10 && 15 == 0o17 && 7 == 0O7 && 5 == 0b101 && 3 == 0B11",
        "1e+3 == 1000.0 && 2E-1 == 0.2 && 1.5e1 == 15.0",
        // `**` and `^` are right-associative.
        "2 ** 3 ** 2 == 512.0 && 2 ^ 3 ^ 2 == 512.0",
        // A braced predicate is not a map literal.
        "any([1, 2], {# > 1})",
        "// a comment\n subject != \"\" /* another */",
        "/* first */ true /* between */ && /**/ subject != \"\" // last",
        "true",
    ] {
        assert_true(expression, &msg);
    }
}

#[test]
fn should_functions() {
    let msg = Msg::new()
        .subject("orders.eu.new")
        .prop("tier", "gold")
        .prop("region", "eu");
    for expression in [
        r#"one(subject_parts, # == "eu") && !one(subject_parts, # != "eu")"#,
        r#"count(subject_parts, # != "") == 3 && count([true, false, true]) == 2"#,
        r#"first(subject_parts) == "orders" && last(subject_parts) == "new" && first([]) == nil"#,
        r#"lower("AbC") == "abc" && upper("a") == "A" && trim("  x ") == "x" && trim("xxaxx", "x") == "a""#,
        r#"split("a,b", ",") == ["a", "b"] && split("a,b,c", ",", 2) == ["a", "b,c"]"#,
        r#"join(subject_parts, "-") == "orders-eu-new" && join(["a", "b"]) == "ab""#,
        "abs(-3) == 3 && abs(-1.5) == 1.5",
        r#"int("42") == 42 && int(2.9) == 2 && float("1.5") == 1.5 && float(2) == 2.0"#,
        r#"string(12) == "12" && string(true) == "true" && string(1.5) == "1.5""#,
        r#"keys(properties) == ["region", "tier"] && values(properties) == ["eu", "gold"]"#,
        r#"all(subject_parts, len(#) > 1) && any(subject_parts, # == "eu") && none(subject_parts, # == "")"#,
        r#"filter(subject_parts, # != "eu") == ["orders", "new"]"#,
        r#"map(subject_parts, upper(#)) == ["ORDERS", "EU", "NEW"]"#,
        "map(subject_parts, #index) == [0, 1, 2]",
        r#"subject_parts | filter(# != "eu") | len() == 2"#,
        "now() > enqueued_at",
    ] {
        assert_true(expression, &msg);
    }
}

#[test]
fn len_counts_code_points() {
    let msg = Msg::new().subject("héllo").body("text/plain", "héllo");
    assert_true(
        "len(subject) == 5 && len(body_text) == 5 && body_size == 6",
        &msg,
    );
}

#[test]
fn static_type_errors() {
    for (source, message) in [
        (
            r#"subject + 1 == "x""#,
            "invalid operation: + (mismatched types string and int)",
        ),
        (
            "enqueued_at + 1 > enqueued_at",
            "invalid operation: + (mismatched types time and int)",
        ),
        (
            "enqueued_at == 0",
            "invalid operation: == (mismatched types time and int)",
        ),
        (
            "hours(1) == body_json.x",
            "invalid operation: == (mismatched types duration and any)",
        ),
        (
            "len([enqueued_at, 1]) == 2",
            "cannot mix time and int values (times and durations only combine with their own kind)",
        ),
        (
            r#"string(enqueued_at) == """#,
            "invalid argument 1 for string (time)",
        ),
        ("subject.Year() == 1", "string has no methods (called Year)"),
        (
            "body_json.t.Year() == 1",
            "any has no methods (called Year)",
        ),
        ("enqueued_at.Format() == 1", "time has no method Format"),
        (
            "visible_at - enqueued_at",
            "filter must be a boolean expression, but its type is duration",
        ),
        (
            "1 in properties",
            "invalid operation: in (mismatched types int and map[string]string)",
        ),
        (
            "subject_parts",
            "filter must be a boolean expression, but its type is []string",
        ),
        (
            r#"subject_parts["a"] == "b""#,
            "cannot index []string with string",
        ),
        (r#"len(1, 2) == 1"#, "len() takes 1 argument(s), got 2"),
        (
            "all(subject_parts, 1)",
            "all() predicate must be bool, not int",
        ),
        ("all(body_size, true)", "all() needs an array, not int"),
        (r#"# == "x""#, "# is only defined inside a predicate"),
        ("$env != nil", "unknown name $env"),
        ("let subject = 1; true", "cannot redeclare variable subject"),
        (
            "nil",
            "filter must be a boolean expression, but its type is nil",
        ),
        ("not subject == \"x\"", "invalid operation: not on string"),
        ("now", "unknown name now"),
        ("repeat(\"x\", 2) == \"xx\"", "unknown function repeat"),
        (
            "find(subject_parts, # == \"a\") != nil",
            "unknown function find",
        ),
        (
            "all(subject_parts, true, 1)",
            "all() takes an array and a predicate",
        ),
        (
            "len(subject_parts, {true}) == 1",
            "len() does not take a predicate",
        ),
    ] {
        assert_eq!(compile_error(source), message, "{source}");
    }
}

// ---------------------------------------------------------------------------
// Indexing, literals, operators, builtins and limits (docs/semantics.md#filters).

#[test]
fn c186_index_out_of_range_is_an_error() {
    let msg = Msg::new().subject("a.b.c");
    assert_true(
        r#"subject_parts[-1] == "c" && subject_parts[-3] == "a""#,
        &msg,
    );
    assert_runtime_error("subject_parts[-4] == nil", &msg);
    assert_runtime_error("subject_parts[3] == nil", &msg);
    assert_runtime_error("[1, 2][body_size + 2] == nil", &msg);
    assert_runtime_error(
        "body_json.a[0] == nil",
        &Msg::new().body("", r#"{"a": []}"#),
    );
    assert_runtime_error(
        "body_json.a[0.0] == nil",
        &Msg::new().body("", r#"{"a": [1]}"#),
    );
}

#[test]
fn c196_missing_property_is_empty_string() {
    let msg = Msg::new().prop("tier", "gold");
    assert_true(
        r#"properties["missing"] == "" && properties.missing == """#,
        &msg,
    );
    assert_true(
        r#"properties?.missing == "" && properties.tier == "gold""#,
        &msg,
    );
    assert_true(r#"(properties.missing ?? "x") == """#, &msg);
    // body_json is map[string]any: a missing member is nil.
    assert_true(
        "body_json.missing == nil && body_json?.missing == nil",
        &msg,
    );
    assert_runtime_error("body_json.a.b == nil", &msg);
    assert_true("body_json.a?.b == nil", &msg);
}

#[test]
fn string_escapes() {
    let msg = Msg::new();
    for expression in [
        r#"len("a\\nb") == 4"#,
        r#"len("a\nb") == 3"#,
        r#"'it\'s' == "it's""#,
        r#""say \"hi\"" == 'say "hi"'"#,
        r#""\u00e9" == "é" && len("\u00e9") == 1"#,
        r#""\/" == "/" && len("\t\r\b\f") == 4"#,
        r#""a`b" == 'a`b' && len("`") == 1 && "``" + "`" == "```""#,
        r#"`raw\n` == "raw\\n""#,
    ] {
        assert_true(expression, &msg);
    }
    assert!(compile_error(r#""\x41" == "A""#).starts_with("invalid escape"));
    assert!(compile_error(r#""\ud800" == "A""#).starts_with("invalid \\u escape"));
    assert!(compile_error(r#""open"#).starts_with("unterminated string literal"));
}

#[test]
fn negated_word_operators() {
    let msg = Msg::new().subject("orders.eu.new");
    for expression in [
        r#"subject not contains "x""#,
        r#"subject not startsWith "eu""#,
        r#"subject not endsWith "eu""#,
        r#"subject not matches "^eu""#,
        r#"subject contains "o" and subject not contains "x" and subject contains "n""#,
        r#"all(subject_parts, # not contains "x") && subject contains "eu""#,
        r#"subject matches "eu" && subject not matches "x" && subject matches "new$""#,
    ] {
        assert_true(expression, &msg);
    }
    assert_false(r#"subject not contains "eu""#, &msg);
    assert_false(r#"subject not matches "eu""#, &msg);
}

#[test]
fn nil_coalescing_binds_tightly() {
    let none = Msg::new();
    let seven = Msg::new().body("", r#"{"x": 7}"#);
    assert_false("body_json.x ?? 0 > 5", &none);
    assert_true("body_json.x ?? 0 > 5", &seven);
    assert_true("body_json.x ?? 1 + 1 == 2", &none);
    assert_true("body_json.x ?? body_json.y ?? 3 == 3", &none);
    assert_true("-body_json.x ?? 2 == -2", &none);
    assert_true("body_json.x ?? -2 == -2", &none);
    assert_true(r#"len(body_json.s ?? "ab") == 2"#, &none);
}

#[test]
fn map_and_bytes_literals_are_rejected() {
    assert_eq!(
        compile_error("{a: subject} == nil"),
        "map literals are not supported in filters"
    );
    assert_eq!(
        compile_error("{\"a\": 1} != nil"),
        "map literals are not supported in filters"
    );
    assert_eq!(
        compile_error("len({}) == 0"),
        "map literals are not supported in filters"
    );
    assert_eq!(
        compile_error(r#"b"x" != nil"#),
        "bytes literals are not supported in filters"
    );
    // Braces as predicates and blocks are still fine.
    assert!(Filter::compile(r#"all(subject_parts, {# != ""})"#).is_ok());
    assert!(Filter::compile("if true { true } else { false }").is_ok());
}

#[test]
fn predicates() {
    let msg = Msg::new()
        .subject("a.b")
        .body("", r#"{"items": [{"price": 2}, {"price": 3}], "arr": [1]}"#);
    // Second argument is the predicate even without `#`.
    assert_true(
        "all(subject_parts, true) && !any(subject_parts, false)",
        &msg,
    );
    assert_true("count(subject_parts, true) == 2", &msg);
    // Predicates must return booleans at run time.
    let message = assert_runtime_error("all(body_json.arr, #)", &msg);
    assert_eq!(message, "all() predicate returned float, not bool");
    assert_runtime_error("filter(body_json.arr, #) == []", &msg);
    assert_runtime_error("count(body_json.arr) == 1", &msg);
    // Member shorthand reads `#.name`; other unknown names are errors.
    assert_true("all(map(body_json.items, .price), # > 1)", &msg);
    assert_true("map(body_json.items, #.price) == [2, 3]", &msg);
    assert_eq!(
        compile_error("all(body_json.items, price > 1)"),
        "unknown name price"
    );
    assert_runtime_error("all(body_json.missing, true)", &msg);
}

#[test]
fn contains_takes_strings() {
    let msg = Msg::new().body("", r#"{"tags": ["x"], "s": "xyz"}"#);
    assert_runtime_error(r#"body_json.tags contains "x""#, &msg);
    assert_true(
        r#"body_json.s contains "y" && body_json.s startsWith "x" && body_json.s endsWith "z""#,
        &msg,
    );
    assert_eq!(
        compile_error(r#"subject_parts contains "x""#),
        "invalid operation: contains (mismatched types []string and string)"
    );
}

#[test]
fn matches_is_an_re2_search() {
    let msg = Msg::new().subject("orders.eu.new").prop("re", "(");
    assert_true(
        r#"subject matches "^orders\\.eu" && subject matches "(?i)ORDERS" && subject matches "\\w+\\.\\w+""#,
        &msg,
    );
    assert_false(r#"subject matches "^eu""#, &msg);
    // A search, not a full match.
    assert_true(r#"subject matches "eu""#, &msg);
    assert!(compile_error(r#"subject matches "(""#).starts_with("invalid regular expression \"(\""));
    assert!(compile_error(r#"subject matches "\\pL""#).starts_with("invalid regular expression"));
    assert_runtime_error(r#"subject matches properties["re"]"#, &msg);
    assert_true(
        r#"subject matches properties["ok"] ?? "eu""#,
        &msg.clone().prop("ok", "eu"),
    );
    // A constant pattern split by a backtick is still folded and checked.
    assert!(compile_error(r#"subject matches "(`""#).starts_with("invalid regular expression"));
    // Case-insensitive matching folds beyond ASCII, as RE2 does.
    assert_true(r#""ÉTÉ" matches "(?i)été""#, &msg);
}

#[test]
fn matches_searches_a_bounded_amount() {
    let msg = Msg::new().body("text/plain", &"a".repeat(1 << 20));
    // 8 MiB of searching per evaluation: eight scans of a 1 MiB body.
    assert_true(r#"none(1..8, body_text matches "y")"#, &msg);
    let message = assert_runtime_error(r#"none(1..9, body_text matches "y")"#, &msg);
    assert_eq!(message, "filter exceeded its evaluation budget");
    // Patterns that are slow for backtracking or NFA simulation finish.
    assert_false(
        r#"body_text matches "[a-z]{100}x" || body_text matches "(a+a+)+b""#,
        &msg,
    );
}

#[test]
fn split_follows_go() {
    let msg = Msg::new();
    assert_true(
        r#"split("ab", "") == ["a", "b"] && split("", "") == []"#,
        &msg,
    );
    assert_true(
        r#"split("abc", "", 2) == ["a", "bc"] && split("a,b", ",", 0) == []"#,
        &msg,
    );
    assert_true(
        r#"split("", ",") == [""] && split("a,b", ",", -1) == ["a", "b"]"#,
        &msg,
    );
}

#[test]
fn budget_fails_closed() {
    let msg = Msg::new().body("text/plain", &"x".repeat(1 << 20));
    let message = assert_runtime_error("len(1..2000000) > 0", &msg);
    assert_eq!(message, "filter exceeded its evaluation budget");
    assert_runtime_error("all(1..1000, all(1..1000, all(1..10, true)))", &msg);
    assert_runtime_error(
        "let a = body_text + body_text; let b = a + a; let c = b + b; let d = c + c; \
         let e = d + d; let f = e + e; let g = f + f; len(g) > 0",
        &msg,
    );
    assert_runtime_error("len(map(1..100, body_text)) > 0", &msg);
    assert_runtime_error(r#"len(join(map(1..100, "x"), body_text)) > 0"#, &msg);
    // Ordinary use of a large body stays well inside the budget.
    assert_true(
        r#"body_text contains "x" && body_size == 1048576 && len(body_text) > 0"#,
        &msg,
    );
    // The budget is per evaluation.
    let filter = Filter::compile("len(1..600000) > 0").unwrap();
    for _ in 0..3 {
        assert_eq!(filter.evaluate(&msg.input()), Ok(true));
    }
}

#[test]
fn nesting_and_depth_limits() {
    let nested = |n: usize| format!("{}true{}", "(".repeat(n), ")".repeat(n));
    assert!(Filter::compile(&nested(parse::MAX_NESTING)).is_ok());
    assert!(
        compile_error(&nested(parse::MAX_NESTING + 1)).starts_with("expression nested too deeply")
    );
    // Deep arithmetic chains are limited after parsing.
    let sum = format!("{} > 0", vec!["1"; 200].join(" + "));
    assert!(
        compile_error(&sum).starts_with("expression nested too deeply (201 > 128 levels)"),
        "{}",
        compile_error(&sum)
    );
    // Long `||` chains are balanced instead, and evaluate the same.
    let alternatives: Vec<String> = (0..250).map(|i| format!("subject=={i}")).collect();
    let chain = alternatives.join("||");
    assert!(chain.len() < MAX_SOURCE_BYTES);
    let filter = big_stack(move || {
        Filter::compile(&chain)
            .map(|f| f.evaluate(&Msg::new().input()))
            .map_err(|e| e.0)
    });
    assert_eq!(filter, Ok(Ok(false)));
    let mixed = (0..150)
        .map(|i| format!("subject_parts[0]==\"{i}\""))
        .collect::<Vec<_>>()
        .join("&&");
    let result = big_stack(move || {
        Filter::compile(&mixed)
            .map(|f| f.evaluate(&Msg::new().subject("0").input()))
            .map_err(|e| e.0)
    });
    assert_eq!(result, Ok(Ok(false)));
}

/// Nested indexes parse in linear time (no limit of their own).
#[test]
fn nested_indexes() {
    let msg = Msg::new().subject("0.1");
    let nested = |n: usize| format!("{}0{} == 0", "[0, 1][".repeat(n), "]".repeat(n));
    assert_true(&nested(3), &msg);
    assert_true(&nested(20), &msg);
    assert_true(
        r#"subject_parts[0] == "0" && [0][0] == 0 && subject_parts[1:][0] == "1""#,
        &msg,
    );
    assert_true("[[[[0]]]][0][0][0][0] == 0", &msg);
    let heavy = format!("[0][[0][[0][{}]]] == 0", vec!["0"; 490].join("+"));
    let outcome = big_stack(move || Filter::compile(&heavy).err());
    assert_eq!(
        outcome,
        Some(CompileError(
            "expression nested too deeply (494 > 128 levels)".to_string()
        ))
    );
}

#[test]
fn node_limits() {
    // 1004 nodes: len, >, 0, the array and its 1000 elements; parsing
    // stops at node 1001.
    let source = format!("len([{}]) > 0", vec!["1"; 1000].join(","));
    assert_eq!(
        compile_error(&source),
        "expression too complex (more than 1000 AST nodes)"
    );
    // Exactly 1000 nodes compile.
    let source = format!("len([{}]) > 0", vec!["1"; 996].join(","));
    assert!(Filter::compile(&source).is_ok());
}

#[test]
fn time_values_are_typed() {
    // Times and durations only combine with their own kind.
    for source in [
        "[enqueued_at, 1][0] == enqueued_at",
        "(true ? enqueued_at : 1) == enqueued_at",
        "(body_json.x ?? enqueued_at) == enqueued_at",
        "enqueued_at in [1, 2]",
        "enqueued_at > 1",
        "hours(1) / 2 > 0",
        "enqueued_at + enqueued_at > enqueued_at",
    ] {
        assert!(Filter::compile(source).is_err(), "{source}");
    }
    let msg = Msg::new();
    assert_true(
        "enqueued_at in [visible_at] && [hours(1)] == [minutes(60)]",
        &msg,
    );
    assert_true("(true ? enqueued_at : nil) == visible_at", &msg);
    assert_true("first([enqueued_at]).Year() == 2024", &msg);
    assert_runtime_error("(false ? enqueued_at : nil).Year() == 2024", &msg);
}

#[test]
fn body_is_materialised_only_when_referenced() {
    use super::program::Var;
    let msg = Msg::new()
        .subject("a")
        .body("application/json", r#"{"a": 1}"#);
    let input = msg.input();
    let check = |source: &str, text: bool, json: bool| {
        let Some(expr) = Filter::compile(source).unwrap().compiled else {
            panic!("match-all");
        };
        let mut run = eval::Eval::new(&input);
        assert!(
            matches!(run.eval(&expr), Ok(value::Value::Bool(true))),
            "{source}"
        );
        assert_eq!(run.materialised(Var::BodyText), text, "{source}");
        assert_eq!(run.materialised(Var::BodyJson), json, "{source}");
    };
    check(r#"subject == "a""#, false, false);
    check(r#"subject == "a" || body_text == """#, false, false);
    check(r#"body_text != """#, true, false);
    check("body_json.a == 1", false, true);
}

#[test]
fn filters_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Filter>();
}

/// A random expression over the filter language (often ill-typed, which
/// exercises the checker too).
fn random_expression(rng: &mut Rng, depth: u32) -> String {
    const ATOMS: [&str; 16] = [
        "subject",
        "properties",
        "body_json",
        "body_text",
        "subject_parts",
        "enqueued_at",
        "visible_at",
        "body_size",
        "property_keys",
        "1",
        "2.5",
        "\"a.b\"",
        "true",
        "nil",
        "[1, 2]",
        "body_json.a",
    ];
    const BINARY: [&str; 20] = [
        "+",
        "-",
        "*",
        "/",
        "%",
        "**",
        "==",
        "!=",
        "<",
        ">=",
        "&&",
        "||",
        "in",
        "not in",
        "contains",
        "not contains",
        "startsWith",
        "matches",
        "..",
        "??",
    ];
    const CALLS: [&str; 14] = [
        "len", "all", "any", "map", "filter", "count", "first", "string", "int", "keys", "split",
        "join", "hours", "duration",
    ];
    if depth == 0 {
        return ATOMS[rng.pick(ATOMS.len())].to_string();
    }
    let sub = |rng: &mut Rng| random_expression(rng, depth - 1);
    match rng.pick(11) {
        0..=2 => {
            let (a, b) = (sub(rng), sub(rng));
            format!("{a} {} {b}", BINARY[rng.pick(BINARY.len())])
        }
        3 => format!("!({})", sub(rng)),
        4 => {
            let name = CALLS[rng.pick(CALLS.len())];
            let (a, b) = (sub(rng), sub(rng));
            match rng.pick(3) {
                0 => format!("{name}({a})"),
                1 => format!("{name}({a}, {b})"),
                _ => format!("{name}({a}, # {} {b})", BINARY[rng.pick(BINARY.len())]),
            }
        }
        5 => format!("{}[{}]", sub(rng), sub(rng)),
        6 => format!("{}.a", sub(rng)),
        7 => format!("({}) ? {} : {}", sub(rng), sub(rng), sub(rng)),
        8 => format!(
            "({}).{}()",
            sub(rng),
            ["Year", "Month", "Hours", "Unix"][rng.pick(4)]
        ),
        9 => format!("[{}, {}]", sub(rng), sub(rng)),
        _ => format!("({})", sub(rng)),
    }
}

/// xorshift64: deterministic test input.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Compiling and evaluating arbitrary input never panics (the Worker cannot
/// recover from one): random expressions, and random token soup.
#[test]
fn no_panics_on_random_input() {
    const TOKENS: [&str; 62] = [
        "subject",
        "properties",
        "body_json",
        "body_text",
        "subject_parts",
        "enqueued_at",
        "visible_at",
        "#",
        "#index",
        ".",
        "?.",
        "[",
        "]",
        "(",
        ")",
        "{",
        "}",
        ",",
        ":",
        "?",
        "??",
        "|",
        "+",
        "-",
        "*",
        "/",
        "%",
        "**",
        "==",
        "!=",
        "<",
        ">=",
        "&&",
        "||",
        "!",
        "not",
        "in",
        "contains",
        "matches",
        "startsWith",
        "..",
        "1",
        "-1",
        "0",
        "2.5",
        "\"a\"",
        "'b'",
        "`c`",
        "true",
        "nil",
        "len(",
        "all(",
        "map(",
        "filter(",
        "duration(",
        "hours(",
        "let x = 1;",
        "x",
        "if",
        "else",
        ".Year()",
        ".Hours()",
    ];
    let msg = Msg::new()
        .subject("a.b")
        .prop("k", "v")
        .body("", r#"{"a": [1, {"b": "c"}], "n": 2}"#);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut compiled, mut evaluated) = (0, 0);
    for round in 0..8_000 {
        let source = if round % 3 == 0 {
            let len = 1 + rng.pick(12);
            let tokens: Vec<&str> = (0..len).map(|_| TOKENS[rng.pick(TOKENS.len())]).collect();
            tokens.join(" ")
        } else {
            let depth = 1 + rng.pick(4) as u32;
            random_expression(&mut rng, depth)
        };
        let outcome = std::panic::catch_unwind(|| match Filter::compile(&source) {
            Ok(filter) => Some(filter.evaluate(&msg.input()).is_ok()),
            Err(_) => None,
        });
        match outcome {
            Ok(Some(ok)) => {
                compiled += 1;
                evaluated += usize::from(ok);
            }
            Ok(None) => {}
            Err(_) => panic!("panicked on {source:?}"),
        }
    }
    assert!(
        compiled > 150 && evaluated > 50,
        "{compiled} compiled, {evaluated} evaluated"
    );
}

/// The largest inputs the limits allow are handled without exhausting the
/// stack. Run here on a big stack because debug frames are far larger than
/// release wasm's; the same inputs were run as release wasm under V8, where
/// they pass with a third of its default stack.
#[test]
fn no_stack_exhaustion_at_the_limits() {
    let chain = |item: &str, op: &str, n: usize| vec![item; n].join(op);
    let cases: Vec<(String, Result<bool, &str>)> = vec![
        (
            format!("{} > 0", chain("1", "+", 499)),
            Err("expression nested too deeply (500 > 128 levels)"),
        ),
        (
            format!("subject_parts{} == nil", ".a".repeat(498)),
            Err("expression nested too deeply"),
        ),
        (chain("true", "&&", 500), Ok(true)),
        (chain("false", "||", 500), Ok(false)),
        (
            format!("{}1{} == 1", "[".repeat(64), "]".repeat(64)),
            Ok(false),
        ),
        (
            format!("{}1{}", "-(".repeat(32), ")".repeat(32)) + " == 1",
            Ok(true),
        ),
        (
            format!("{}subject{} == 0", "len(".repeat(40), ")".repeat(40)),
            Err("invalid argument for len (int)"),
        ),
        (format!("true{}", " ? true : false".repeat(64)), Ok(true)),
        (format!("nil{} == 1", " ?? nil".repeat(63)), Ok(false)),
        (
            format!("{}true{}", "all(subject_parts, ".repeat(30), ")".repeat(30)),
            Ok(true),
        ),
        (
            format!("{}true{}", "all(1..10, ".repeat(30), ")".repeat(30)),
            Err("filter exceeded its evaluation budget"),
        ),
    ];
    for (source, expected) in cases {
        let shown = source.chars().take(40).collect::<String>();
        let outcome = big_stack(move || {
            Filter::compile(&source)
                .map_err(|e| e.0)
                .and_then(|f| f.evaluate(&Msg::new().subject("a").input()))
        });
        match (&outcome, expected) {
            (Ok(got), Ok(want)) => assert_eq!(*got, want, "{shown}"),
            (Err(got), Err(want)) => assert!(got.starts_with(want), "{shown}: {got}"),
            _ => panic!("{shown}: got {outcome:?}, expected {expected:?}"),
        }
    }
}

/// Issue 9: every cost a filter can cause, regular-expression compilation
/// included, comes out of one budget per evaluation; adversarial filters
/// fail closed quickly instead of holding the isolate for seconds.
#[test]
fn adversarial_filters_fail_closed() {
    let big = "ab".repeat(1 << 19); // 1 MiB
    let msg = Msg::new()
        .subject("orders.eu")
        .prop("re", "x")
        .prop("slow", "(?i)[a-zé]{60}")
        .body("text/plain", &big);
    let budget = "filter exceeded its evaluation budget";
    for source in [
        // A different pattern compiled per element.
        r#"any(1..400000, subject matches properties["re"] + string(#))"#,
        r#"any(1..400000, subject matches properties["slow"] + string(#))"#,
        // One pattern, compiled once, but too many elements.
        r#"any(1..400000, subject matches properties["re"])"#,
        // Scanning a 1 MiB body again and again.
        r#"any(1..1000, body_text contains "zz")"#,
        r#"any(1..1000, body_text matches "zz")"#,
        r#"any(1..1000, body_text matches properties["re"])"#,
        // Builtins that read all of a 1 MiB text, again and again.
        "any(1..1000, len(body_text) == 0)",
        r#"any(1..1000, len(split(body_text, "ab", 1)) == 0)"#,
        r#"any(1..1000, trim(body_text, "ab") != "")"#,
        // Building large values.
        r#"len(split(body_text, "")) > 0"#,
        "len(map(1..100000, body_text)) > 0",
        "len(filter(1..1000000, true)) > 0",
        "all(1..1000, all(1..1000, true))",
        r#"len(body_text + body_text + body_text) > 0 && all(1..100, len(lower(body_text)) > 0)"#,
    ] {
        assert_eq!(run(source, &msg), Err(budget.to_string()), "{source}");
    }
    // Parsing a long number or duration reads all of it too.
    let digits = Msg::new().body("text/plain", &"0".repeat(1 << 20));
    for source in [
        "any(1..1000, int(body_text) != 0)",
        "any(1..1000, float(body_text) != 0.0)",
    ] {
        assert_eq!(run(source, &digits), Err(budget.to_string()), "{source}");
    }
    let zeros = Msg::new().body("text/plain", &"0s".repeat(1 << 19));
    let source = "any(1..1000, duration(body_text) != seconds(0))";
    assert_eq!(run(source, &zeros), Err(budget.to_string()), "{source}");
    // A pattern too large to compile is an error, not a long compile.
    assert!(
        run(r#"subject matches "\\w{100}" + properties["re"]"#, &msg)
            .is_err_and(|e| e.starts_with("invalid regular expression"))
    );
    // Repeating one dynamic pattern is cheap: it is compiled once.
    assert_true(r#"none(1..1000, subject matches properties["re"])"#, &msg);
}

#[test]
fn now_reads_the_engine_clock() {
    let msg = Msg {
        now_ms: E + 3 * 3_600_000,
        ..Msg::new()
    };
    assert_true("now() - enqueued_at == hours(3)", &msg);
    assert_true("now().Hour() == 13", &msg);
}

#[test]
fn chained_comparisons() {
    let msg = Msg::new().subject("a.b.c");
    assert_true("1 < len(subject_parts) < 4", &msg);
    assert_false("1 < len(subject_parts) <= 2", &msg);
    assert_true("0 <= body_size < 1 == true", &msg);
}

/// c200: a runtime type error says which builtin refused what, in the words
/// TestFilter shows (pinned from mutation testing: docs/testing.md).
#[test]
fn c200_builtin_type_errors_name_the_function_and_the_value() {
    let msg = Msg::new().body("application/json", r#"{"s": "x", "n": 1, "a": ["x"]}"#);
    for (source, message) in [
        (
            "first(body_json.s) == 1",
            "first() needs an array, not string",
        ),
        ("last(body_json.n) == 1", "last() needs an array, not float"),
        (
            r#"join(body_json.s) == """#,
            "join() needs an array, not string",
        ),
        (
            "len(keys(body_json.a)) == 1",
            "keys() needs a map, not array",
        ),
        (
            "lower(body_json.n) == \"\"",
            "lower() needs a string, not float",
        ),
        (
            r#"len(split("a,b", ",", body_json.s)) == 2"#,
            "split() needs an integer, not string",
        ),
    ] {
        assert_eq!(run(source, &msg), Err(message.to_string()), "{source}");
    }
}

/// `int()` of a float outside i64 (NaN, infinities, |f| ≥ 2^63) is an error,
/// not Go's unspecified result; everything inside converts, truncated.
#[test]
fn int_of_a_float_converts_exactly_the_floats_inside_i64() {
    let msg = Msg::new().body(
        "application/json",
        r#"{"big": 1e19, "top": 9223372036854775808.0, "edge": 9.2e18, "near": 9.22e18, "min": -9223372036854775808.0}"#,
    );
    for source in [
        "int(body_json.big) > 0",
        "int(-body_json.big) < 0",
        "int(body_json.top) > 0",
    ] {
        assert_eq!(
            run(source, &msg),
            Err("int(): cannot convert float".to_string()),
            "{source}"
        );
    }
    assert_true("int(body_json.edge) == 9200000000000000000", &msg);
    assert_true("int(body_json.near) == 9220000000000000000", &msg);
    assert_true("int(body_json.min) < -9223372036854775000", &msg);
    assert_true("int(-2.9) == -2", &msg);
}

/// `join` charges the text it builds: forty references to one 1 MiB body
/// joined are 40 MiB more, past the 64 MiB memory budget.
#[test]
fn join_charges_what_it_builds() {
    let msg = Msg::new().body("text/plain", &"ab".repeat(1 << 19));
    assert_true("len(map(1..40, body_text)) == 40", &msg);
    assert_over_budget("len(join(map(1..40, body_text))) > 0", &msg);
}

/// `keys` and `values` charge 16 bytes per member: sixty key lists of a
/// 100,000-member body exceed the 64 MiB memory budget.
#[test]
fn keys_and_values_charge_each_member() {
    let members: Vec<String> = (0..100_000).map(|i| format!("\"k{i}\":0")).collect();
    let msg = Msg::new().body("application/json", &format!("{{{}}}", members.join(",")));
    assert_true("len(keys(body_json)) == 100000", &msg);
    for source in [
        "any(1..60, len(keys(body_json)) == 0)",
        "any(1..60, len(values(body_json)) == 0)",
    ] {
        assert_over_budget(source, &msg);
    }
}

/// `split` charges 16 bytes per piece plus the text: a 6 MB body in 100,001
/// pieces, split nine times, is 68 MB (past the 64 MiB memory budget) while
/// its scan (54 MB) and steps (900,009) stay inside theirs.
#[test]
fn split_charges_each_piece_and_the_text() {
    let msg = Msg::new().body(
        "text/plain",
        &format!("{},", "x".repeat(59)).repeat(100_000),
    );
    assert_true(r#"len(split(body_text, ",")) == 100001"#, &msg);
    assert_over_budget(r#"any(1..9, len(split(body_text, ",")) == 0)"#, &msg);
}

fn assert_over_budget(source: &str, msg: &Msg) {
    assert_eq!(
        run(source, msg),
        Err("filter exceeded its evaluation budget".to_string()),
        "{source}"
    );
}

/// The checker's type rules, operator by operator (docs/semantics.md#filters):
/// what each accepts (and evaluates as expr does) and what it refuses at
/// compile time with the operator's own words. Each line pins one arm or
/// guard of `check.rs`.
#[test]
fn type_rules_accept_and_refuse_at_compile_time() {
    let msg = Msg::new().body(
        "application/json",
        r#"{"x": 2, "a": "bc", "t": [1, 2], "o": {"k": 1}, "items": [{"ok": true}]}"#,
    );
    for source in [
        // Times compare with nil and with arrays holding nil.
        "enqueued_at != nil",
        "[enqueued_at] != [nil]",
        // `?:` of one type keeps it, times included.
        "(true ? enqueued_at : visible_at) == enqueued_at",
        // Run-time values slice, negate and take arithmetic on either side.
        r#"body_json.a[0:1] == "b""#,
        "-body_json.x == -2",
        "body_json.x - 1 == 1",
        "3 - body_json.x == 1",
        "body_json.x * 2 == 4",
        "2 * body_json.x == 4",
        "1 + body_json.x == 3",
        r#""a" + body_json.a == "abc""#,
        "1 in body_json.t",
        // Mixed numbers are floats.
        "1.5 - 1 == 0.5",
        "2 * 1.5 == 3.0",
        "7 % 4 == 3",
        "len(1..3) == 3",
        // A bare unknown name as a predicate reads the element's member.
        "any(body_json.items, ok)",
        "abs(-body_json.x) == 2",
        r#"int("3") % 2 == 1"#,
        "len(keys(body_json.o)) == 1",
        "len(values(body_json.o)) == 1",
        "values(body_json.o)[0] + 1 == 2",
        // A range counts its elements from its start, negative or not.
        "len(-2..0) == 3",
        // `in` a run-time nil is false, not an error.
        "not (1 in body_json.missing)",
    ] {
        assert_true(source, &msg);
    }
    for (source, message) in [
        (
            "(true ? [1] : [\"a\"]) + 1 == 2",
            "invalid operation: + (mismatched types []any and int)",
        ),
        (
            "(true ? properties : body_json) + 1 == 2",
            "invalid operation: + (mismatched types map[string]any and int)",
        ),
        (
            "(true ? [enqueued_at] : 1) == nil",
            "cannot mix []time and int values (times and durations only combine with their own kind)",
        ),
        (r#"-subject == """#, "invalid operation: - on string"),
        ("body_size[0:1] == nil", "cannot slice int"),
        (
            "subject - 1 == 0",
            "invalid operation: - (mismatched types string and int)",
        ),
        (
            "1 - subject == 0",
            "invalid operation: - (mismatched types int and string)",
        ),
        (
            "1 - enqueued_at > 0",
            "invalid operation: - (mismatched types int and time)",
        ),
        (
            r#"subject * 2 == """#,
            "invalid operation: * (mismatched types string and int)",
        ),
        (
            "2 * enqueued_at > 0",
            "invalid operation: * (mismatched types int and time)",
        ),
        (
            "1.5 % 2 == 1",
            "invalid operation: % (mismatched types float and int)",
        ),
        (
            "len(1..2.5) == 2",
            "invalid operation: .. (mismatched types int and float)",
        ),
        (
            r#"1 < "a""#,
            "invalid operation: < (mismatched types int and string)",
        ),
        ("1 in 2", "invalid operation: in (mismatched types int and int)"),
        (
            "enqueued_at in body_json.t",
            "invalid operation: in (mismatched types time and any)",
        ),
        (
            r#"1 contains "a""#,
            "invalid operation: contains (mismatched types int and string)",
        ),
        (
            r#"1 matches "a""#,
            "invalid operation: matches (mismatched types int and string)",
        ),
        ("properties[1] == \"\"", "cannot index map[string]string with int"),
        (r#"abs("a") == 1"#, "invalid argument for abs (string)"),
        (
            r#"float("1.5") % 2 == 1"#,
            "invalid operation: % (mismatched types float and int)",
        ),
        ("len(keys(1)) == 0", "keys() needs a map, not int"),
        ("len(values(1)) == 0", "values() needs a map, not int"),
        (
            "keys(body_json.o)[0] + 1 == 1",
            "invalid operation: + (mismatched types string and int)",
        ),
        ("all([true])", "all() needs a predicate"),
        // A dot after an integer and before a letter or `_` is a member, not
        // a decimal point.
        ("1.e5 == 100000.0", "cannot index int with string"),
        ("1._x == 1", "cannot index int with string"),
        (
            "subject == \"\\u41",
            "invalid \\u escape in string literal at byte 12",
        ),
        (". == 1", "syntax error at line 1, column 1: unexpected token ."),
        // Braces outside an argument are neither a predicate nor a map.
        ("{# > 1}", "syntax error at line 1, column 1: unexpected token {"),
        (
            "contains == 1",
            "syntax error at line 1, column 1: unexpected token contains",
        ),
        (
            "1 == 12abc",
            "syntax error at line 1, column 6: invalid number literal 12a",
        ),
        (
            r#"[1, 2][0] + "a" == """#,
            "invalid operation: + (mismatched types int and string)",
        ),
        // `not` goes only before the word operators.
        (
            "1 not == 1",
            "syntax error at line 1, column 7: unexpected token ==",
        ),
    ] {
        assert_eq!(compile_error(source), message, "{source}");
    }
    // The first of the empty literal is a run-time nil, not a nil type.
    assert_eq!(
        run("first([])", &msg),
        Err("filter returned nil, not bool".to_string())
    );
}

/// A compile error displays as its message (TestFilter's `error`, c195).
#[test]
fn a_compile_error_displays_its_message() {
    let message = compile_error("subject +");
    assert!(!message.is_empty());
    let shown = Filter::compile("subject +").err().map(|e| e.to_string());
    assert_eq!(shown, Some(message));
}

/// The depth bound is inclusive: 128 levels compile, 129 do not.
#[test]
fn depth_of_exactly_the_bound_compiles() {
    // `1 + … + 1 > 0` with n ones is n + 1 levels deep.
    let sum = |n: usize| format!("{} > 0", vec!["1"; n].join(" + "));
    assert!(Filter::compile(&sum(MAX_DEPTH - 1)).is_ok());
    assert_eq!(
        compile_error(&sum(MAX_DEPTH)),
        format!("expression nested too deeply (129 > {MAX_DEPTH} levels)")
    );
}

/// A sign is an operation on numbers and durations at run time too.
#[test]
fn a_sign_on_a_run_time_string_is_an_error() {
    let msg = Msg::new().body("application/json", r#"{"a": "bc"}"#);
    assert_eq!(
        run(r#"+body_json.a == "bc""#, &msg),
        Err("invalid operation: + on string".to_string())
    );
}

/// A variable costs what it holds, and `body_json` as much again for its
/// nesting; a concatenation costs what it builds. With a 33 MiB body: the
/// text alone fits the 64 MiB memory budget, the text and a copy of it do
/// not, nor does the decoded body and a copy of one of its members.
#[test]
fn variables_and_concatenations_charge_what_they_hold() {
    let size = 33 << 20;
    let text = Msg::new().body("text/plain", &"x".repeat(size));
    assert_true(r#"body_text != """#, &text);
    assert_over_budget(r#""" + body_text != """#, &text);
    let json = Msg::new().body(
        "application/json",
        &format!(r#"{{"a": "{}"}}"#, "x".repeat(size)),
    );
    assert_true(r#"body_json.a != """#, &json);
    assert_over_budget(r#"body_json.a + "" != """#, &json);
}

/// With the budget nearly spent on `body_text`: an array literal charges 16
/// bytes an element each time it is built, and `in properties` asks for a
/// key without building the map of every property.
#[test]
fn literals_charge_their_elements_and_a_key_lookup_builds_no_map() {
    let mut msg = Msg::new().body("text/plain", &"x".repeat((64 << 20) - (512 << 10)));
    for i in 0..20_000 {
        msg = msg.prop(&format!("k{i}"), "v");
    }
    let fifty = vec!["1"; 50].join(", ");
    assert_false("body_text != \"\" && any(1..1000, len([1]) == 0)", &msg);
    assert_over_budget(
        &format!("body_text != \"\" && any(1..1000, len([{fifty}]) == 0)"),
        &msg,
    );
    assert_true(r#"body_text != "" && "k1" in properties"#, &msg);
    assert_over_budget(r#"body_text != "" && len(properties) > 0"#, &msg);
}

/// A pattern compiled at run time costs 8 MiB of the scan budget plus 8 per
/// byte of pattern: with 8 MiB and 4 KiB left after a search of the body, a
/// 256-byte pattern compiles and a 1,024-byte one is over budget.
#[test]
fn a_run_time_pattern_charges_eight_per_byte() {
    let left = (8 << 20) + 4096;
    let msg = |pattern_len: usize| {
        Msg::new()
            .body("text/plain", &"y".repeat((64 << 20) - left))
            .prop("p", &"x".repeat(pattern_len))
    };
    let source = r#"!(body_text contains "z") && "x" matches properties.p"#;
    assert_false(source, &msg(256));
    assert_over_budget(source, &msg(1024));
}

/// Evaluation rules, one line each (docs/semantics.md#filters): slices of
/// text count characters from their start, `one` stops at the second match
/// (so a later element is never looked at), a missing property read through
/// a name is `""` as it is directly, and run-time errors say what failed.
#[test]
fn evaluation_rules() {
    let msg = Msg::new().body("application/json", r#"{"a": "bc"}"#);
    for source in [
        r#""abcd"[1:2] == "b""#,
        r#""abcd"[2:] == "cd""#,
        "one([true, true, 1], #) == false",
        r#"let p = properties; p.missing == """#,
    ] {
        assert_true(source, &msg);
    }
    for (source, message) in [
        (
            "body_json.a - 1 == 0",
            "invalid operation: - (mismatched types string and int)",
        ),
        (
            "enqueued_at + hours(2200000) > enqueued_at",
            "time out of range",
        ),
    ] {
        assert_eq!(run(source, &msg), Err(message.to_string()), "{source}");
    }
}

/// A slice costs a step and 16 bytes per element it keeps. With the memory
/// budget nearly spent on `body_text` (512 KiB left) and a 20,000-element
/// range held (320,000 bytes), its last element fits and the whole of it
/// (as much again) does not; 600 one-element slices of a 2,000-element
/// range take a step each, not the range's length.
#[test]
fn slices_charge_what_they_keep() {
    let msg = Msg::new().body("text/plain", &"x".repeat((64 << 20) - (512 << 10)));
    let range = "let a = 1..20000; body_text != \"\" && ";
    assert_true(&format!("{range}len(a[19999:20000]) == 1"), &msg);
    assert_over_budget(&format!("{range}len(a[0:20000]) == 20000"), &msg);
    assert_false(
        "let a = 1..2000; any(1..600, len(a[1999:2000]) == 0)",
        &Msg::new(),
    );
}

/// Calendar fields across century and era boundaries (the proleptic
/// Gregorian calendar, as Go's `time`): 2100 and 1700 are not leap years,
/// 2000 is (the last day of a 400-year era), instants before 1970 count
/// back, and 2262-04-11 is the last day nanoseconds since 1970 reach.
#[test]
fn calendar_fields_across_centuries() {
    for (ms, year, month, day, weekday) in [
        (4_107_456_000_000_i64, 2100, 2, 28, 0),
        (4_107_542_400_000, 2100, 3, 1, 1),
        (4_133_980_800_000, 2101, 1, 1, 6),
        (951_782_400_000, 2000, 2, 29, 2),
        (951_868_800_000, 2000, 3, 1, 3),
        (-2_203_891_200_000, 1900, 3, 1, 4),
        (-8_515_324_800_000, 1700, 2, 28, 0),
        (-8_515_238_400_000, 1700, 3, 1, 1),
        (9_223_286_400_000, 2262, 4, 11, 5),
    ] {
        let msg = Msg {
            enqueued_at_ms: ms,
            ..Msg::new()
        };
        assert_true(
            &format!(
                "enqueued_at.Year() == {year} && enqueued_at.Month() == {month} \
                 && enqueued_at.Day() == {day} && enqueued_at.Weekday() == {weekday}"
            ),
            &msg,
        );
    }
}

/// `==` and `<` on ints are exact (not through float64), arrays and maps
/// compare member by member and length, and `string()` of arrays and maps
/// separates members with one space, as Go's `%v`.
#[test]
fn equality_order_and_text_of_values() {
    let msg = Msg::new().body(
        "application/json",
        r#"{"o": {"k": 1}, "p": {"k": 1}, "q": {"k": 2}, "r": {"j": 1}, "s": {"k": 1, "m": 2}}"#,
    );
    for source in [
        "9007199254740993 != 9007199254740992",
        "9007199254740993 > 9007199254740992",
        "[1, 2] != [1] && [1] != [1, 2] && [1, 2] == [1, 2]",
        "properties == properties",
        "body_json.o == body_json.p",
        "body_json.o != body_json.q",
        "body_json.o != body_json.r",
        "body_json.o != body_json.s && body_json.s != body_json.o",
        r#"string([1, 2, 3]) == "[1 2 3]""#,
        r#"string(body_json.s) == "map[k:1 m:2]""#,
    ] {
        assert_true(source, &msg);
    }
}

/// What `map()` keeps is charged by its weight: 16 bytes an element of an
/// array, 48 a member of a map. 20,000 subject parts (320,016 bytes) kept
/// 200 times fit the 64 MiB memory budget, 215 times do not; 20,000
/// properties (960,016 bytes) 60 times fit, 70 times do not.
#[test]
fn kept_arrays_and_maps_charge_their_members() {
    let subject = vec!["a"; 20_000].join(".");
    let parts = Msg::new().subject(&subject);
    assert_true("len(map(1..200, subject_parts)) == 200", &parts);
    assert_over_budget("len(map(1..215, subject_parts)) == 215", &parts);
    let mut props = Msg::new();
    for i in 0..20_000 {
        props = props.prop(&format!("k{i}"), "v");
    }
    assert_true("len(map(1..60, properties)) == 60", &props);
    assert_over_budget("len(map(1..70, properties)) == 70", &props);
}
