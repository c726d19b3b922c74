//! Constant SQL statements.
//!
//! Every statement the engine sends is a [`Statement`] built at compile time
//! by [`statement!`](crate::statement): the text never changes per request,
//! so the database parses the same few strings every time and the query
//! plans pinned in tests are the plans production runs. Variable-length input
//! travels as bound parameters (one JSON array, one blob), never as text.
//!
//! Time: a template's `{now}` placeholders become one bound parameter,
//! `coalesce(?N, <database clock>)`, numbered right after the statement's own
//! parameters. Production binds NULL there, so the database clock decides;
//! tests bind a manual clock's value through the very same text.
//!
//! Line breaks, written for reading, become spaces: a text without a
//! character JSON escapes is written into Hrana's JSON as a plain copy, and
//! the group-commit object reads a member's texts in place
//! (`store::fold::SentStatement`) instead of unescaping a copy of each.

/// One constant statement and where its clock parameter sits.
#[derive(Debug, PartialEq, Eq)]
pub struct Statement {
    pub sql: &'static str,
    /// 1-based index of the clock parameter; 0 when the text reads no clock.
    pub clock_param: usize,
}

/// The database's clock in epoch milliseconds.
pub const DATABASE_NOW: &str = "CAST(round(unixepoch('subsec') * 1000) AS INTEGER)";

/// The clock parameter's index for `template`: one past its highest `?N`,
/// or 0 when the template has no `{now}`.
pub const fn clock_index(template: &str) -> usize {
    let bytes = template.as_bytes();
    let mut highest = 0;
    let mut has_now = false;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'?' {
            let mut n = 0;
            let mut j = i + 1;
            while j < bytes.len() && bytes[j].is_ascii_digit() {
                n = n * 10 + (bytes[j] - b'0') as usize;
                j += 1;
            }
            if n > highest {
                highest = n;
            }
        }
        if bytes[i] == b'{' && i + 4 < bytes.len() {
            let s = [bytes[i + 1], bytes[i + 2], bytes[i + 3], bytes[i + 4]];
            if s[0] == b'n' && s[1] == b'o' && s[2] == b'w' && s[3] == b'}' {
                has_now = true;
            }
        }
        i += 1;
    }
    if has_now {
        highest + 1
    } else {
        0
    }
}

/// Builds a [`Statement`] from a constant template at compile time,
/// replacing `{now}` with the clock parameter (see the module docs).
#[macro_export]
macro_rules! statement {
    ($template:expr) => {{
        const TEMPLATE: &str = $template;
        const CLOCK: usize = $crate::store::statement::clock_index(TEMPLATE);
        const NOW: &str = $crate::store::statement::const_format::concatcp!(
            "coalesce(?",
            CLOCK,
            ", ",
            $crate::store::statement::DATABASE_NOW,
            ")"
        );
        const TIMED: &str =
            $crate::store::statement::const_format::str_replace!(TEMPLATE, "{now}", NOW);
        $crate::store::Statement {
            // One line: nothing for JSON to escape (see the module docs).
            sql: $crate::store::statement::const_format::str_replace!(TIMED, "\n", " "),
            clock_param: CLOCK,
        }
    }};
}

/// A guard statement: fails (so the transaction rolls back) exactly when
/// the constant condition holds. SQLite has no `RAISE` outside triggers, so
/// the guard feeds `json()` a string that is valid JSON (`'0'`) or not
/// (`'abort'`) depending on the condition; the argument depends on the
/// condition itself, so no constant folding can evaluate the failing branch
/// early, and the statement only reads.
#[macro_export]
macro_rules! guard {
    ($violated_when:expr) => {
        $crate::statement!($crate::store::statement::const_format::concatcp!(
            "SELECT json(CASE WHEN ",
            $violated_when,
            " THEN 'abort' ELSE '0' END)"
        ))
    };
}

pub use const_format;

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Statement = crate::statement!("SELECT 1 FROM queues WHERE name = ?1");
    const TIMED: Statement =
        crate::statement!("SELECT ?2 FROM t WHERE a = ?1 AND b <= {now} AND c > {now}");
    const GUARD: Statement = crate::guard!("?1 >= {now}");

    #[test]
    fn a_statement_without_time_has_no_clock_parameter() {
        assert_eq!(PLAIN.clock_param, 0);
        assert_eq!(PLAIN.sql, "SELECT 1 FROM queues WHERE name = ?1");
    }

    #[test]
    fn the_clock_parameter_follows_the_highest_parameter() {
        assert_eq!(TIMED.clock_param, 3);
        let now = format!("coalesce(?3, {DATABASE_NOW})");
        assert_eq!(
            TIMED.sql,
            format!("SELECT ?2 FROM t WHERE a = ?1 AND b <= {now} AND c > {now}")
        );
    }

    #[test]
    fn a_statement_is_one_line() {
        const MULTI: Statement = crate::statement!("SELECT 1\nFROM queues\n  WHERE {now} > 0");
        assert!(!MULTI.sql.contains('\n'), "{}", MULTI.sql);
        assert!(MULTI
            .sql
            .starts_with("SELECT 1 FROM queues   WHERE coalesce(?1, "));
    }

    #[test]
    fn guards_wrap_their_condition() {
        assert_eq!(GUARD.clock_param, 2);
        assert!(GUARD
            .sql
            .starts_with("SELECT json(CASE WHEN ?1 >= coalesce(?2, "));
        assert!(GUARD.sql.ends_with(" THEN 'abort' ELSE '0' END)"));
    }

    /// Only `{now}` itself asks for the clock, wherever it stands (first,
    /// last, after a multi-digit parameter); its look-alikes and a `{now`
    /// cut short at the end do not, and nothing reads past the text.
    #[test]
    fn only_a_whole_now_placeholder_asks_for_the_clock() {
        for (template, index) in [
            ("{now} = ?2", 3),
            ("?12 < {now}", 13),
            ("?1 ?3 ?2", 0),
            ("?1 xnow} ", 0),
            ("?1 {nowx ", 0),
            ("?1 {nope} ", 0),
            ("?1 {xow} ", 0),
            ("?1 {nox} ", 0),
            ("?1 {now", 0),
            ("?1 {no", 0),
        ] {
            assert_eq!(clock_index(template), index, "{template}");
        }
    }
}
