//! Go `flag`-style parsing, as mqlite's command line does it (mqlite-clients.md §2.1):
//! `-name` and `--name` alike, `--name value` or `--name=value`, booleans only as
//! `--name` or `--name=true|false`, flags between positionals, `--` ends the flags, a
//! lone `-` is a positional, and anything else starting with `-` is a flag error.

use std::collections::BTreeMap;

/// A flag a command accepts.
#[derive(Debug, Clone, Copy)]
pub struct Flag {
    pub name: &'static str,
    pub boolean: bool,
    pub help: &'static str,
}

pub const fn value(name: &'static str, help: &'static str) -> Flag {
    Flag {
        name,
        boolean: false,
        help,
    }
}

pub const fn boolean(name: &'static str, help: &'static str) -> Flag {
    Flag {
        name,
        boolean: true,
        help,
    }
}

/// Why parsing stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum ParseError {
    /// `-h`/`--help`: print the flags, exit 0.
    Help,
    /// A flag error: exit 2.
    Flag(String),
}

/// Positionals in order and the flags given (the last value of a repeated flag wins).
#[derive(Debug, Default)]
pub struct Parsed {
    pub positionals: Vec<String>,
    pub flags: BTreeMap<&'static str, String>,
}

impl Parsed {
    pub fn given(&self, name: &str) -> bool {
        self.flags.contains_key(name)
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.flags.get(name).map(String::as_str)
    }

    pub fn string(&self, name: &str) -> String {
        self.get(name).unwrap_or_default().to_owned()
    }

    pub fn bool(&self, name: &str) -> bool {
        self.get(name) == Some("true")
    }
}

pub fn parse(args: &[String], known: &[Flag]) -> Result<Parsed, ParseError> {
    let mut parsed = Parsed::default();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            parsed.positionals.extend(rest.cloned());
            break;
        }
        let Some(stripped) = arg.strip_prefix('-').filter(|s| !s.is_empty()) else {
            parsed.positionals.push(arg.clone());
            continue;
        };
        let stripped = stripped.strip_prefix('-').unwrap_or(stripped);
        let (name, inline) = match stripped.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (stripped, None),
        };
        if name == "h" || name == "help" {
            return Err(ParseError::Help);
        }
        let Some(flag) = known.iter().find(|f| f.name == name) else {
            return Err(ParseError::Flag(format!(
                "flag provided but not defined: -{name}"
            )));
        };
        let value = match (flag.boolean, inline) {
            (true, None) => "true".to_owned(),
            (true, Some(v)) => match v {
                "true" | "1" | "t" | "T" | "TRUE" | "True" => "true".to_owned(),
                "false" | "0" | "f" | "F" | "FALSE" | "False" => "false".to_owned(),
                _ => {
                    return Err(ParseError::Flag(format!(
                        "invalid boolean value {v:?} for -{name}"
                    )))
                }
            },
            (false, Some(v)) => v.to_owned(),
            (false, None) => rest
                .next()
                .cloned()
                .ok_or_else(|| ParseError::Flag(format!("flag needs an argument: -{name}")))?,
        };
        parsed.flags.insert(flag.name, value);
    }
    Ok(parsed)
}

/// The flag list `-h` prints.
pub fn describe(known: &[Flag]) -> String {
    known
        .iter()
        .map(|f| {
            let kind = if f.boolean { "" } else { " value" };
            format!("  -{}{kind}\n    \t{}\n", f.name, f.help)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLAGS: &[Flag] = &[value("group", "g"), boolean("no-ack", "n")];

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn flags_may_sit_between_positionals_in_either_spelling() {
        let p = parse(&words("q hello -group g --no-ack world"), FLAGS).unwrap();
        assert_eq!(p.positionals, ["q", "hello", "world"]);
        assert_eq!(p.get("group"), Some("g"));
        assert!(p.bool("no-ack"));
        let p = parse(&words("--group=x --no-ack=false q"), FLAGS).unwrap();
        assert_eq!((p.get("group"), p.bool("no-ack")), (Some("x"), false));
    }

    #[test]
    fn a_double_dash_ends_the_flags_and_a_lone_dash_is_positional() {
        let p = parse(&words("q -- hello --output json"), FLAGS).unwrap();
        assert_eq!(p.positionals, ["q", "hello", "--output", "json"]);
        let p = parse(&words("q -"), FLAGS).unwrap();
        assert_eq!(p.positionals, ["q", "-"]);
    }

    #[test]
    fn unknown_flags_negative_numbers_and_a_missing_value_are_flag_errors() {
        assert!(matches!(
            parse(&words("complete q -1 tok"), FLAGS),
            Err(ParseError::Flag(_))
        ));
        assert!(matches!(
            parse(&words("q --group"), FLAGS),
            Err(ParseError::Flag(_))
        ));
        assert!(matches!(
            parse(&words("q --no-ack=maybe"), FLAGS),
            Err(ParseError::Flag(_))
        ));
        assert_eq!(parse(&words("q -h"), FLAGS).unwrap_err(), ParseError::Help);
    }
}
