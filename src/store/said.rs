//! What the queue's object says of a grouped write beside the database's
//! answer (docs/engine.md#group-commit): its `commit` method answers
//! `[said, body]`, `said` one string written here and read back by the
//! Worker.

use super::Carried;

/// The object's verdicts.
pub const ANSWER: &str = "answer";
pub const RETRY: &str = "retry";
pub const LOST: &str = "lost";
/// The object will not run it (no database configured, a fault): the
/// Worker sends it directly.
pub const UNAVAILABLE: &str = "unavailable";

/// `<verdict>.<database status>.<batch size>.<flags>`. The batch size is 0
/// when the write was in no batch; the flags are four `0`/`1`: the write
/// was its batch's first member (which counts the batch: Observe,
/// `/metrics`), it was folded with others of its kind, the object woke the
/// queue's waiters on its commit, and the queue is idle (it went alone, no
/// other write reached the object within `IDLE_FOR_MS` before it, nothing
/// waits behind it and no waiter was parked: `store::lone`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Said<'a> {
    pub verdict: &'a str,
    /// The database's status, beside an [`ANSWER`]; 0 otherwise.
    pub status: u16,
    pub carried: Carried,
    pub woke: bool,
    pub idle: bool,
}

impl std::fmt::Display for Said<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (members, first, folded) = match self.carried {
            Carried::Batch {
                members,
                first,
                folded,
            } => (members, first, folded),
            Carried::Direct | Carried::Lone => (0, false, false),
        };
        write!(f, "{}.{}.{members}.", self.verdict, self.status)?;
        for on in [first, folded, self.woke, self.idle] {
            f.write_str(if on { "1" } else { "0" })?;
        }
        Ok(())
    }
}

impl<'a> Said<'a> {
    /// `None` when `said` is not one [`Said`] wrote.
    pub fn parse(said: &'a str) -> Option<Self> {
        let mut fields = said.split('.');
        let (verdict, status, members, flags) = (
            fields.next()?,
            fields.next()?,
            fields.next()?,
            fields.next()?,
        );
        if fields.next().is_some()
            || flags.len() != 4
            || flags.bytes().any(|b| b != b'0' && b != b'1')
        {
            return None;
        }
        let flag = |i: usize| flags.as_bytes()[i] == b'1';
        let carried = match members.parse::<u32>().ok()? {
            0 => Carried::Direct,
            members => Carried::Batch {
                members,
                first: flag(0),
                folded: flag(1),
            },
        };
        Some(Said {
            verdict,
            status: status.parse().ok()?,
            carried,
            woke: flag(2),
            idle: flag(3),
        })
    }
}

/// Whether a failed call to the object was refused by the platform before
/// the object saw it, so nothing ran and the Worker may send the write
/// directly: an object or account shedding load (the error's `.overloaded`
/// flag, or its message), or the Worker's own subrequest limit, or the
/// account's (the Free plan's daily allowance, a spending cap).
/// An object reset (its memory or CPU limit, a storage timeout, a code
/// update) can come after the object took the write into a batch that
/// committed, and so can any failure not named here: those stay
/// `503 outcome_unknown` (docs/engine.md#group-commit).
pub fn refused_before_delivery(message: &str, overloaded: bool) -> bool {
    let lower = message.to_ascii_lowercase();
    if lower.contains("reset") {
        return false;
    }
    overloaded
        || [
            "overloaded",
            "too many requests",
            "too much load",
            "too many subrequests",
            "exceeded allowed",
            "spending cap",
        ]
        .iter()
        .any(|p| lower.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(members: u32, first: bool, folded: bool) -> Carried {
        Carried::Batch {
            members,
            first,
            folded,
        }
    }

    #[test]
    fn what_the_object_says_reads_back_as_it_was_said() {
        let cases = [
            Said {
                verdict: ANSWER,
                status: 200,
                carried: batch(7, true, false),
                woke: false,
                idle: false,
            },
            Said {
                verdict: ANSWER,
                status: 503,
                carried: batch(64, false, true),
                woke: true,
                idle: false,
            },
            Said {
                verdict: ANSWER,
                status: 200,
                carried: batch(1, true, false),
                woke: false,
                idle: true,
            },
            Said {
                verdict: RETRY,
                status: 0,
                carried: batch(3, false, false),
                woke: false,
                idle: false,
            },
            Said {
                verdict: LOST,
                status: 0,
                carried: batch(2, true, true),
                woke: true,
                idle: true,
            },
            Said {
                verdict: UNAVAILABLE,
                status: 0,
                carried: Carried::Direct,
                woke: false,
                idle: false,
            },
        ];
        for said in cases {
            let text = said.to_string();
            assert_eq!(Said::parse(&text), Some(said), "{text}");
        }
    }

    #[test]
    fn each_field_has_its_place() {
        let said = Said {
            verdict: ANSWER,
            status: 200,
            carried: batch(12, true, false),
            woke: true,
            idle: false,
        };
        assert_eq!(said.to_string(), "answer.200.12.1010");
        let unavailable = Said {
            verdict: UNAVAILABLE,
            status: 0,
            carried: Carried::Lone,
            woke: false,
            idle: false,
        };
        assert_eq!(unavailable.to_string(), "unavailable.0.0.0000");
    }

    #[test]
    fn anything_else_is_not_read() {
        for text in [
            "",
            "answer",
            "answer.200",
            "answer.200.3",
            "answer.x.3.0000",
            "answer.200.x.0000",
            "answer.200.3.000",
            "answer.200.3.00000",
            "answer.200.3.0020",
            "answer.200.3.0000.more",
            "answer.70000.3.0000",
        ] {
            assert_eq!(Said::parse(text), None, "{text}");
        }
    }

    /// Cloudflare's wording for a refused call (Durable Objects error
    /// handling and troubleshooting docs) against the resets that may come
    /// after the object took the write: sending those directly could run a
    /// committed Send twice.
    #[test]
    fn only_a_refusal_before_delivery_sends_the_write_directly() {
        for refused in [
            "Error: Durable Object is overloaded. Too many requests queued.",
            "Error: Durable Object is overloaded. Too much data queued.",
            "Error: Durable Object is overloaded. Requests queued for too long.",
            "Error: Durable Object is overloaded. Too many requests for the same object within a 10 second window.",
            "Error: Your account is generating too much load on Durable Objects. Please back off and try again later.",
            "Error: Too many subrequests.",
            "Error: Exceeded allowed volume of requests in Durable Objects free tier.",
            "Error: Exceeded allowed duration in Durable Objects free tier.",
            "Error: Exceeded the account's spending cap for Durable Objects.",
        ] {
            assert!(refused_before_delivery(refused, false), "{refused}");
        }
        for maybe_ran in [
            "Error: Durable Object's isolate exceeded its memory limit and was reset.",
            "Error: Durable Object exceeded its CPU time limit and was reset.",
            "Error: Durable Object storage operation exceeded timeout which caused object to be reset.",
            "Error: Durable Object reset because its code was updated.",
            "Error: Internal error in Durable Object storage caused object to be reset.",
            "Error: Network connection lost.",
            "TypeError: the object threw",
        ] {
            assert!(!refused_before_delivery(maybe_ran, false), "{maybe_ran}");
        }
        assert!(refused_before_delivery("Error: shedding", true));
        assert!(!refused_before_delivery(
            "Error: Durable Object exceeded its CPU time limit and was reset.",
            true
        ));
    }
}
