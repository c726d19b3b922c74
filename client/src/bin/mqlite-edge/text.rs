//! The command line's text conventions, as mqlite's Go build has them: durations in Go's
//! syntax, RFC 3339 times, and bodies quoted like Go's `strconv.Quote`.

/// A Go duration (`1h30m`, `1.5s`, `250ms`, `0`) in milliseconds, truncated toward zero.
/// No `d` unit and no bare numbers other than `0`.
pub fn parse_duration_ms(text: &str) -> Result<i64, String> {
    parse_duration_ns(text).map(|ns| (ns / 1e6).trunc() as i64)
}

/// A Go duration in nanoseconds (sub-millisecond bounds are refused by their callers).
pub fn parse_duration_ns(text: &str) -> Result<f64, String> {
    let bad = || format!("invalid duration {text:?}");
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0.0);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..number_end].parse().map_err(|_| bad())?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        nanos += number * scale;
        rest = &rest[unit_end..];
    }
    Ok(if negative { -nanos } else { nanos })
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// An RFC 3339 time (`2030-01-02T03:04:05.5Z`, `…+02:00`) as epoch milliseconds.
pub fn parse_rfc3339_ms(text: &str) -> Result<i64, String> {
    let bad = || format!("invalid time {text:?} (want RFC 3339 or a duration)");
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return Err(bad());
    }
    let num = |s: &str| s.parse::<i64>().map_err(|_| bad());
    let (y, mo, d) = (num(&text[0..4])?, num(&text[5..7])?, num(&text[8..10])?);
    if b[13] != b':' || b[16] != b':' {
        return Err(bad());
    }
    let (h, mi, s) = (
        num(&text[11..13])?,
        num(&text[14..16])?,
        num(&text[17..19])?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return Err(bad());
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let padded = format!("{:0<3}", &frac[..digits.min(3)]);
        millis = num(&padded)?;
        rest = &frac[digits..];
    }
    let offset_min = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return Err(bad()),
            };
            sign * (num(&rest[1..3])? * 60 + num(&rest[4..6])?)
        }
        _ => return Err(bad()),
    };
    let seconds = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset_min * 60;
    Ok(seconds * 1000 + millis)
}

/// Epoch milliseconds as RFC 3339 in UTC, the fraction trimmed of trailing zeros (none
/// when whole), as Go's `RFC3339Nano` prints it.
pub fn format_rfc3339_ms(ms: i64) -> String {
    let (seconds, millis) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, secs) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let fraction = if millis == 0 {
        String::new()
    } else {
        format!(".{millis:03}").trim_end_matches('0').to_owned()
    };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}{fraction}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// Go's `unicode.IsPrint`, approximated without Unicode tables: ASCII space, and any
/// character that is neither a control, other whitespace, nor a common format character.
fn printable(c: char) -> bool {
    c == ' '
        || !(c.is_control()
            || c.is_whitespace()
            || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{feff}'))
}

/// A double-quoted literal of `bytes` as Go's `strconv.Quote` writes it: `"` and `\`
/// escaped, the C escapes, other non-printables as `\xNN`, `\uNNNN` or `\UNNNNNNNN`, and
/// bytes that are not UTF-8 as `\xNN`.
pub fn go_quote(bytes: &[u8]) -> String {
    let mut out = String::from('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{7}' => out.push_str("\\a"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{b}' => out.push_str("\\v"),
                c if printable(c) => out.push(c),
                c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
                c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push_str(&format!("\\U{:08x}", c as u32)),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_follow_go_syntax() {
        assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("1.5s"), Ok(1500));
        assert_eq!(parse_duration_ms("250ms"), Ok(250));
        assert_eq!(parse_duration_ms("900us"), Ok(0));
        assert_eq!(parse_duration_ms("0"), Ok(0));
        assert_eq!(parse_duration_ms("-2s"), Ok(-2000));
        assert!(parse_duration_ms("5").is_err());
        assert!(parse_duration_ms("1d").is_err());
        assert!(parse_duration_ms("").is_err());
    }

    #[test]
    fn rfc3339_round_trips_through_epoch_milliseconds() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(
            parse_rfc3339_ms("2030-01-02T03:04:05.5+01:00"),
            Ok(1_893_549_845_500)
        );
        assert_eq!(
            format_rfc3339_ms(1_893_549_845_500),
            "2030-01-02T02:04:05.5Z"
        );
        assert_eq!(format_rfc3339_ms(1_893_549_845_000), "2030-01-02T02:04:05Z");
        assert_eq!(
            format_rfc3339_ms(951_782_400_120),
            "2000-02-29T00:00:00.12Z"
        );
        assert!(parse_rfc3339_ms("2030-01-02 03:04:05Z").is_err());
        assert!(parse_rfc3339_ms("soon").is_err());
    }

    #[test]
    fn bodies_are_quoted_like_go() {
        assert_eq!(go_quote(b"hi \"you\"\n"), r#""hi \"you\"\n""#);
        assert_eq!(go_quote("é\u{7f}\u{a0}".as_bytes()), r#""é\x7f\u00a0""#);
        assert_eq!(go_quote(&[0x61, 0xff, 0x00]), r#""a\xff\x00""#);
        assert_eq!(go_quote(b""), r#""""#);
    }
}
