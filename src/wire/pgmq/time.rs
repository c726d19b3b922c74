//! ISO-8601 instants, as the dialect reads (`delay`, `vt`) and writes
//! (every timestamp) them: epoch milliseconds ↔ `YYYY-MM-DDTHH:MM:SS.mmmZ`.

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
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

/// `ms` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
pub fn format_ms(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rest = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

fn digits(s: &str, range: std::ops::Range<usize>) -> Option<i64> {
    let part = s.get(range)?;
    if part.bytes().all(|b| b.is_ascii_digit()) {
        part.parse().ok()
    } else {
        None
    }
}

/// An ISO-8601 date (`YYYY-MM-DD`, midnight UTC) or date-time
/// (`YYYY-MM-DD[T ]HH:MM[:SS[.f…]]`, then `Z`, `±HH:MM`, `±HHMM` or nothing
/// for UTC) in epoch milliseconds.
pub fn parse_iso(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, mo, d) = (digits(s, 0..4)?, digits(s, 5..7)?, digits(s, 8..10)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    let day_ms = days_from_civil(y, mo, d) * 86_400_000;
    if b.len() == 10 {
        return Some(day_ms);
    }
    if !matches!(b[10], b'T' | b't' | b' ') || b.len() < 16 || b[13] != b':' {
        return None;
    }
    let (h, mi) = (digits(s, 11..13)?, digits(s, 14..16)?);
    let mut i = 16;
    let mut sec = 0;
    let mut frac_ms = 0;
    if b.get(i) == Some(&b':') {
        sec = digits(s, i + 1..i + 3)?;
        i += 3;
        if matches!(b.get(i), Some(b'.' | b',')) {
            let start = i + 1;
            let end = start + b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
            if end == start {
                return None;
            }
            let mut ms_text: String = s.get(start..end)?.chars().take(3).collect();
            while ms_text.len() < 3 {
                ms_text.push('0');
            }
            frac_ms = ms_text.parse::<i64>().ok()?;
            i = end;
        }
    }
    if h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    let offset_min = match s.get(i..)? {
        "" | "Z" | "z" => 0,
        tz => {
            let sign = match tz.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let rest = tz.get(1..)?.replace(':', "");
            if rest.len() != 4 {
                return None;
            }
            sign * (digits(&rest, 0..2)? * 60 + digits(&rest, 2..4)?)
        }
    };
    Some(day_ms + ((h * 60 + mi - offset_min) * 60 + sec) * 1000 + frac_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_round_trip_through_iso_8601() {
        assert_eq!(format_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_ms(1_750_000_000_123), "2025-06-15T15:06:40.123Z");
        assert_eq!(
            parse_iso("2025-06-15T15:06:40.123Z"),
            Some(1_750_000_000_123)
        );
        assert_eq!(
            parse_iso("2025-06-15T17:06:40.123456+02:00"),
            Some(1_750_000_000_123)
        );
        assert_eq!(parse_iso("2025-06-15 15:06:40"), Some(1_750_000_000_000));
        assert_eq!(parse_iso("1970-01-02"), Some(86_400_000));
        for bad in [
            "x",
            "2025-13-01",
            "2025-06-15T25:00",
            "2025-06-15T15:06:40+2",
            "abc",
        ] {
            assert_eq!(parse_iso(bad), None, "{bad}");
        }
    }
}
