use std::time::Duration;

/// Parse `500ms`, `10s`, `5m`, `24h`, `30d`, `1y` (365 days), or a plain
/// number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 500ms, 10s, 5m, 24h, 30d, 1y)"))?;
    let ms = match unit {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "y" => 365 * 86_400_000,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit {unit:?} (use ms, s, m, h, d or y)"
            ))
        }
    };
    n.checked_mul(ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{s:?} is too long"))
}

/// The shortest exact form of a duration in the units `parse_duration` reads.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis() as u64;
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms >= size && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// A time left, for people: its two or three largest units, smaller ones
/// dropped (`29d 23h 54m`, `5h 3m 10s`, `42s`, `850ms`). Use
/// [`format_duration`] where the exact value matters.
pub fn format_remaining(d: Duration) -> String {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    let secs = ms / 1_000;
    let parts = [
        (secs / 86_400, "d"),
        (secs / 3_600 % 24, "h"),
        (secs / 60 % 60, "m"),
        (secs % 60, "s"),
    ];
    let first = parts.iter().position(|(n, _)| *n > 0).unwrap_or(3);
    parts[first..(first + 3).min(parts.len())]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(
            parse_duration("30d").unwrap(),
            Duration::from_secs(30 * 86_400)
        );
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(format_duration(Duration::from_secs(86_400)), "1d");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
    }

    #[test]
    fn remaining_for_people() {
        let f = |ms| format_remaining(Duration::from_millis(ms));
        assert_eq!(f(2_591_694_801), "29d 23h 54m");
        assert_eq!(f(30 * 86_400_000), "30d");
        assert_eq!(f(86_400_000 + 5 * 60_000 + 7_000), "1d 5m");
        assert_eq!(f(5 * 3_600_000 + 3 * 60_000 + 10_999), "5h 3m 10s");
        assert_eq!(f(42_000), "42s");
        assert_eq!(f(61_000), "1m 1s");
        assert_eq!(f(999), "999ms");
        assert_eq!(f(0), "0ms");
        assert_eq!(format_remaining(Duration::MAX), "213503982334d 14h 25m");
    }
}
