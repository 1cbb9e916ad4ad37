//! How the report writes numbers: milliseconds, operations, ratios, sizes
//! and the date.

/// Milliseconds from microseconds, with sensible precision.
pub fn ms(us: f64) -> String {
    let ms = us / 1000.0;
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 10.0 {
        format!("{ms:.1}")
    } else if ms >= 1.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.3}")
    }
}

/// A count or a rate, rounded, with thousands separators: "1,234,567".
pub(crate) fn ops(v: f64) -> String {
    crate::driver::group(v.round() as u64)
}

/// Rush over Redis as "2.00×" ("–" when Redis did nothing).
pub(crate) fn ratio(rush: f64, redis: f64) -> String {
    if redis > 0.0 {
        format!("{:.2}×", rush / redis)
    } else {
        "–".into()
    }
}

/// Bytes as whole MiB: "42 MiB".
pub(crate) fn mib(b: f64) -> String {
    format!("{:.0} MiB", b / 1048576.0)
}

/// Bytes as MiB below a GiB, else GiB with one decimal: "420 MiB", "9.3 GiB".
pub(crate) fn size(b: f64) -> String {
    const GIB: f64 = 1024.0 * 1048576.0;
    if b < GIB {
        mib(b)
    } else {
        format!("{:.1} GiB", b / GIB)
    }
}

/// Now, as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (date, h, m, _) = rush_client::calendar::utc_parts(secs);
    format!("{date} {h:02}:{m:02} UTC")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_milliseconds() {
        assert_eq!(ms(123.0), "0.123");
        assert_eq!(ms(2500.0), "2.50");
        assert_eq!(ms(12_340.0), "12.3");
        assert_eq!(ms(250_000.0), "250");
    }

    #[test]
    fn formats_sizes() {
        assert_eq!(size(420.0 * 1048576.0), "420 MiB");
        assert_eq!(size(9.3 * 1024.0 * 1048576.0), "9.3 GiB");
    }

    #[test]
    fn utc_date_looks_right() {
        let d = utc_now();
        assert_eq!(d.len(), "2026-11-30 03:10 UTC".len(), "{d}");
        assert!(d.starts_with("20"), "{d}");
    }
}
