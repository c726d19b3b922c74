//! Times and durations, represented as integer nanoseconds.
//!
//! Times are nanoseconds since the Unix epoch in UTC (so `i64` covers years
//! 1677–2262; millisecond timestamps outside that saturate), durations are
//! nanoseconds like Go's `time.Duration`. Written here rather than taken from
//! expr-lang's `temporal` feature, which brings chrono-tz's time-zone database
//! into the wasm for zones a filter never sees (all filter times are UTC).

pub(super) const NANOS_PER_SECOND: i64 = 1_000_000_000;
pub(super) const NANOS_PER_MINUTE: i64 = 60 * NANOS_PER_SECOND;
pub(super) const NANOS_PER_HOUR: i64 = 60 * NANOS_PER_MINUTE;
pub(super) const NANOS_PER_DAY: i64 = 24 * NANOS_PER_HOUR;
pub(super) const NANOS_PER_WEEK: i64 = 7 * NANOS_PER_DAY;

/// A millisecond timestamp as a filter time.
pub(super) fn from_millis(ms: i64) -> i64 {
    ms.saturating_mul(1_000_000)
}

/// `duration(s)`: Go's `time.ParseDuration` plus the units `d` (24 h) and
/// `w` (7 d). A sequence of decimal numbers, each with an optional fraction
/// and a unit (`ns us µs ms s m h d w`), with an optional leading sign; `"0"`
/// needs no unit. There is deliberately no month or year unit.
pub(super) fn parse_duration(text: &str) -> Result<i64, String> {
    let invalid = || format!("invalid duration {text:?}");
    let mut s = text.as_bytes();
    let mut negative = false;
    if let Some((&sign @ (b'-' | b'+'), rest)) = s.split_first() {
        negative = sign == b'-';
        s = rest;
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    const LIMIT: u64 = 1 << 63;
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(invalid());
        }
        // Integer part.
        let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
        let mut whole: u64 = 0;
        for &d in &s[..digits] {
            whole = whole
                .checked_mul(10)
                .and_then(|w| w.checked_add(u64::from(d - b'0')))
                .filter(|&w| w <= LIMIT)
                .ok_or_else(invalid)?;
        }
        s = &s[digits..];
        // Fraction: digits beyond what fits are consumed but ignored.
        let mut fraction: u64 = 0;
        let mut scale = 1.0f64;
        let mut fraction_digits = 0;
        if s.first() == Some(&b'.') {
            s = &s[1..];
            fraction_digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
            let mut overflow = false;
            for &d in &s[..fraction_digits] {
                if overflow {
                    continue;
                }
                match fraction
                    .checked_mul(10)
                    .and_then(|f| f.checked_add(u64::from(d - b'0')))
                {
                    Some(f) if f <= LIMIT => {
                        fraction = f;
                        scale *= 10.0;
                    }
                    _ => overflow = true,
                }
            }
            s = &s[fraction_digits..];
        }
        if digits == 0 && fraction_digits == 0 {
            return Err(invalid());
        }
        let unit_len = s
            .iter()
            .take_while(|b| !(**b == b'.' || b.is_ascii_digit()))
            .count();
        let unit: u64 = match &s[..unit_len] {
            b"ns" => 1,
            // µ as U+00B5 (micro sign) or U+03BC (Greek mu), in UTF-8.
            b"us" | [0xC2, 0xB5, b's'] | [0xCE, 0xBC, b's'] => 1_000,
            b"ms" => 1_000_000,
            b"s" => NANOS_PER_SECOND as u64,
            b"m" => NANOS_PER_MINUTE as u64,
            b"h" => NANOS_PER_HOUR as u64,
            b"d" => NANOS_PER_DAY as u64,
            b"w" => NANOS_PER_WEEK as u64,
            _ => return Err(invalid()),
        };
        s = &s[unit_len..];
        let mut value = whole
            .checked_mul(unit)
            .filter(|&v| v <= LIMIT)
            .ok_or_else(invalid)?;
        if fraction > 0 {
            // Go computes this part in float64 as well.
            value = value
                .checked_add((fraction as f64 * (unit as f64 / scale)) as u64)
                .filter(|&v| v <= LIMIT)
                .ok_or_else(invalid)?;
        }
        total = total
            .checked_add(value)
            .filter(|&t| t <= LIMIT)
            .ok_or_else(invalid)?;
    }
    if negative {
        // LIMIT itself is i64::MIN's magnitude.
        return Ok(0i64.wrapping_sub_unsigned(total));
    }
    i64::try_from(total).map_err(|_| invalid())
}

/// A calendar or clock field of a time (UTC), as Go's `time.Time` methods
/// return them: `Month` 1–12, `Weekday` 0 (Sunday) – 6, `Unix` in seconds.
pub(super) fn field(nanos: i64, name: &str) -> Option<i64> {
    let seconds = nanos.div_euclid(NANOS_PER_SECOND);
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    Some(match name {
        "Year" => civil(days).0,
        "Month" => civil(days).1,
        "Day" => civil(days).2,
        "Hour" => of_day / 3600,
        "Minute" => of_day % 3600 / 60,
        "Second" => of_day % 60,
        // 1970-01-01 was a Thursday.
        "Weekday" => (days + 4).rem_euclid(7),
        "Unix" => seconds,
        _ => return None,
    })
}

/// A duration in a unit as a float, as Go's `Duration.Hours()` and friends
/// compute it (whole units plus the remainder, to keep precision).
pub(super) fn duration_in(nanos: i64, name: &str) -> Option<f64> {
    let unit = match name {
        "Hours" => NANOS_PER_HOUR,
        "Minutes" => NANOS_PER_MINUTE,
        "Seconds" => NANOS_PER_SECOND,
        _ => return None,
    };
    Some((nanos / unit) as f64 + (nanos % unit) as f64 / unit as f64)
}

/// Year, month (1–12) and day of the month for a day count since 1970-01-01
/// (proleptic Gregorian; H. Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
