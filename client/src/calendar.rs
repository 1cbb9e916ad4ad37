//! UTC dates and times for people, and TIME arguments, on `jiff`: what
//! the CLI prints and reads, and the bench's report stamps.
//!
//! Everything the server sends is unix milliseconds; a value outside
//! jiff's range (years -9999..=9999) is printed as the number it is rather
//! than refused, so a strange answer never stops a listing.

use crate::duration::parse_duration;
use jiff::civil::{Date, Time};
use jiff::tz::TimeZone;
use jiff::Timestamp;

const DAY_MS: i64 = 86_400_000;

fn from_ms(ms: u64) -> Option<Timestamp> {
    Timestamp::from_millisecond(i64::try_from(ms).ok()?).ok()
}

/// `YYYY-MM-DD` of a day number (days since 1970-01-01).
pub fn date(days: i64) -> String {
    days.checked_mul(DAY_MS)
        .and_then(|ms| Timestamp::from_millisecond(ms).ok())
        .map(|t| TimeZone::UTC.to_datetime(t).date().to_string())
        .unwrap_or_else(|| format!("day {days}"))
}

/// Unix seconds as (`YYYY-MM-DD`, hours, minutes, seconds) in UTC.
pub fn utc_parts(secs: i64) -> (String, i64, i64, i64) {
    match Timestamp::from_second(secs) {
        Ok(t) => {
            let z = TimeZone::UTC.to_datetime(t);
            (
                z.date().to_string(),
                i64::from(z.hour()),
                i64::from(z.minute()),
                i64::from(z.second()),
            )
        }
        Err(_) => (format!("second {secs}"), 0, 0, 0),
    }
}

/// Unix ms as RFC 3339 in UTC, to the second: `2026-11-29T08:00:00Z`.
pub fn timestamp(ms: u64) -> String {
    match from_ms(ms) {
        Some(t) => format!("{t:.0}"),
        None => format!("{ms} (unix ms)"),
    }
}

/// Unix ms as RFC 3339 in UTC, exactly: milliseconds when there are any
/// (`2000-02-29T00:00:00.250Z`), so [`parse_time`] reads back the same
/// value.
pub fn timestamp_exact(ms: u64) -> String {
    match from_ms(ms) {
        Some(t) if ms.is_multiple_of(1000) => format!("{t:.0}"),
        Some(t) => format!("{t:.3}"),
        None => ms.to_string(),
    }
}

/// A TIME argument as unix milliseconds: a number of unix ms, `now`,
/// `now+DURATION` / `now-DURATION` (e.g. `now+30d`), a date `2026-11-29`
/// (midnight UTC) or an RFC 3339 time with its offset
/// (`2026-11-29T08:00:00Z`, `2026-11-29T16:00:00+08:00`, to the
/// millisecond). `now_ms` is what `now` means.
pub fn parse_time(s: &str, now_ms: u64) -> Result<u64, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map_err(|_| format!("{s:?} is too large"));
    }
    if let Some(rest) = s.strip_prefix("now") {
        if rest.is_empty() {
            return Ok(now_ms);
        }
        let mut chars = rest.chars();
        let sign = chars.next();
        let relative = || -> Result<u64, String> {
            let d = parse_duration(chars.as_str())?;
            Ok(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        };
        return match sign {
            Some('+') => Ok(now_ms.saturating_add(relative()?)),
            Some('-') => now_ms
                .checked_sub(relative()?)
                .ok_or_else(|| format!("{s:?} is before 1970")),
            _ => Err(format!("{s:?}: use now, now+DURATION or now-DURATION")),
        };
    }
    let what = || {
        format!("{s:?} is not a time (unix ms, now, now+30d, 2026-11-29 or 2026-11-29T08:00:00Z)")
    };
    let t = if s.len() == 10 {
        let d: Date = s.parse().map_err(|e| format!("{}: {e}", what()))?;
        TimeZone::UTC
            .to_timestamp(d.to_datetime(Time::midnight()))
            .map_err(|e| format!("{}: {e}", what()))?
    } else {
        s.parse::<Timestamp>()
            .map_err(|e| format!("{}: {e}", what()))?
    };
    if t.subsec_nanosecond() % 1_000_000 != 0 {
        return Err(format!("{s:?} is finer than a millisecond"));
    }
    u64::try_from(t.as_millisecond()).map_err(|_| format!("{s:?} is before 1970"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_stamps() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(19_723), "2024-01-01");
        assert_eq!(date(-1), "1969-12-31");
        assert_eq!(date(i64::MAX), format!("day {}", i64::MAX));
        assert_eq!(utc_parts(86_400 + 3_723), ("1970-01-02".into(), 1, 2, 3));
        assert_eq!(
            timestamp(951_782_400_000 + 3_723_456),
            "2000-02-29T01:02:03Z"
        );
        assert_eq!(timestamp(u64::MAX), format!("{} (unix ms)", u64::MAX));
        assert_eq!(timestamp_exact(86_400_000), "1970-01-02T00:00:00Z");
        assert_eq!(timestamp_exact(951_782_400_250), "2000-02-29T00:00:00.250Z");
    }

    #[test]
    fn times() {
        let now = 1_800_000_000_000;
        let p = |s| parse_time(s, now);
        assert_eq!(p("0"), Ok(0));
        assert_eq!(p("1970-01-02"), Ok(86_400_000));
        assert_eq!(
            p("2026-11-29T08:00:00Z"),
            Ok(1_795_910_400_000 + 8 * 3_600_000)
        );
        assert_eq!(
            p("2026-11-29T16:00:00+08:00"),
            p("2026-11-29T08:00:00Z"),
            "offsets are honoured"
        );
        assert_eq!(p("2000-02-29T00:00:00.250Z"), Ok(951_782_400_250));
        assert_eq!(p("now"), Ok(now));
        assert_eq!(p("now+1h"), Ok(now + 3_600_000));
        assert_eq!(p("now-1d"), Ok(now - 86_400_000));
        for bad in [
            "2026-02-30",
            "2026-13-01",
            "2026-11-29T08:00:00",
            "2026-11-29T08:00:00.0001Z",
            "1969-12-31",
            "yesterday",
            "now*2",
            "now€",
            "now+",
            "",
            "99999999999999999999999",
        ] {
            assert!(p(bad).is_err(), "{bad:?} accepted: {:?}", p(bad));
        }
        assert!(parse_time("now-1d", 1).is_err(), "before 1970");
        for ms in [0, 951_782_400_250, 1_795_910_400_000, 4_102_444_800_000] {
            assert_eq!(parse_time(&timestamp_exact(ms), now), Ok(ms));
        }
    }
}
