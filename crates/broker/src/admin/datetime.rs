//! `--to-datetime`: Kafka's `Utils.getDateTime` formats, to milliseconds since the epoch.
//!
//! `YYYY-MM-DDTHH:mm:SS.sss`, optionally followed by a zone: `Z`, `±hh`, `±hhmm` or
//! `±hh:mm`. Without a zone the time is UTC (Kafka appends `Z`). Parsing is strict, as
//! Kafka's (`setLenient(false)`): every field has its fixed width and range.

/// The epoch milliseconds of `text`, or a message saying what is wrong.
pub(crate) fn parse(text: &str) -> Result<i64, String> {
    let bad = |why: &str| {
        format!(
            "invalid --to-datetime '{text}': {why}; expected YYYY-MM-DDTHH:mm:SS.sss, optionally followed by Z, +hh, +hhmm or +hh:mm"
        )
    };
    let bytes = text.as_bytes();
    // "YYYY-MM-DDTHH:mm:SS.sss" is 23 ASCII characters.
    if bytes.len() < 23 || !text.is_ascii() {
        return Err(bad("too short"));
    }
    let (main, zone) = text.split_at(23);
    let m = main.as_bytes();
    for (i, sep) in [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
    ] {
        if m[i] != sep {
            return Err(bad(&format!(
                "expected '{}' at position {}",
                sep as char,
                i + 1
            )));
        }
    }
    let num = |from: usize, to: usize| -> Result<i64, String> {
        let s = &main[from..to];
        if !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(&format!("'{s}' is not a number")));
        }
        s.parse::<i64>()
            .map_err(|_| bad(&format!("'{s}' is not a number")))
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second, millis) = (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 23)?);
    if !(1..=12).contains(&month) {
        return Err(bad("the month is not 01-12"));
    }
    if day < 1 || day > days_in_month(year, month) {
        return Err(bad("the day does not exist in that month"));
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err(bad("the time of day is out of range"));
    }
    let offset_minutes = zone_offset(zone).ok_or_else(|| bad("the time zone is malformed"))?;
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Ok(seconds * 1000 + millis)
}

/// Minutes east of UTC: "" and "Z" are 0; "+hh", "+hhmm", "+hh:mm" (or "-").
fn zone_offset(zone: &str) -> Option<i64> {
    if zone.is_empty() || zone == "Z" {
        return Some(0);
    }
    let sign = match zone.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let rest = &zone[1..];
    let digits = |s: &str| {
        (s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<i64>().ok())
            .flatten()
    };
    let (h, m) = match rest.len() {
        2 => (digits(rest)?, 0),
        4 => (digits(&rest[..2])?, digits(&rest[2..])?),
        5 if rest.as_bytes()[2] == b':' => (digits(&rest[..2])?, digits(&rest[3..])?),
        _ => return None,
    };
    (h <= 23 && m <= 59).then_some(sign * (h * 60 + m))
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_formats_parse_to_epoch_millis() {
        // 2020-11-10T16:51:38.198Z, the example of Kafka's Utils.getDateTime docs.
        let utc = 1_605_027_098_198;
        assert_eq!(parse("2020-11-10T16:51:38.198"), Ok(utc));
        assert_eq!(parse("2020-11-10T16:51:38.198Z"), Ok(utc));
        let plus8 = utc - 8 * 3_600_000;
        assert_eq!(parse("2020-11-10T16:51:38.198+08"), Ok(plus8));
        assert_eq!(parse("2020-11-10T16:51:38.198+0800"), Ok(plus8));
        assert_eq!(parse("2020-11-10T16:51:38.198+08:00"), Ok(plus8));
        assert_eq!(
            parse("2020-11-10T16:51:38.198-01:30"),
            Ok(utc + 90 * 60_000)
        );
        assert_eq!(parse("1970-01-01T00:00:00.000"), Ok(0));
        assert_eq!(parse("1969-12-31T23:59:59.999"), Ok(-1));
        assert_eq!(parse("2024-02-29T00:00:00.000"), Ok(1_709_164_800_000));
    }

    #[test]
    fn anything_else_is_refused_with_the_expected_format() {
        for bad in [
            "",
            "2020-11-10",
            "2020-11-10T16:51:38",
            "2020-11-10 16:51:38.198",
            "2020-13-10T16:51:38.198",
            "2021-02-29T16:51:38.198",
            "2020-11-10T24:00:00.000",
            "2020-11-10T16:51:38.198+8",
            "2020-11-10T16:51:38.198X",
            "2020-11-10T16:51:38.19x",
            "２０２０-11-10T16:51:38.198",
        ] {
            let err = parse(bad).expect_err(bad);
            assert!(err.contains("YYYY-MM-DDTHH:mm:SS.sss"), "{bad}: {err}");
        }
    }
}
