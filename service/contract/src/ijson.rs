//! I-JSON (RFC 7493) for an action's arguments: every number one a double holds
//! exactly, so that the digest every language takes (through doubles, as RFC 8785
//! prints them) is of the very number the human saw. `1234567890123456789` becomes
//! `1234567890123456800` in a double: two different actions would share a digest.

/// The largest integer a double holds with every smaller one: 2^53 - 1.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// The first number of `json` (a valid JSON text) that is not I-JSON, with why: an
/// integer beyond ±(2^53 - 1), or a number a double does not hold exactly.
pub fn first_inexact_number(json: &str) -> Option<(String, &'static str)> {
    let bytes = json.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i = after_string(bytes, i),
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    i += 1;
                }
                let number = &json[start..i];
                if let Some(why) = inexact(number) {
                    return Some((number.to_owned(), why));
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// The index after the string that starts at `start` (its opening quote).
fn after_string(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// Why the JSON number `text` is not I-JSON, if it is not.
fn inexact(text: &str) -> Option<&'static str> {
    let integer = !text.contains(['.', 'e', 'E']);
    if integer {
        let magnitude = text.trim_start_matches('-');
        let fits = magnitude
            .parse::<u64>()
            .is_ok_and(|n| n <= MAX_SAFE_INTEGER);
        return (!fits).then_some("an integer beyond ±(2^53 - 1)");
    }
    let Ok(value) = text.parse::<f64>() else {
        return Some("not a number a double holds");
    };
    if !value.is_finite() {
        return Some("beyond the range of a double");
    }
    // The shortest decimal that reads back as this double, against the text's own.
    (decimal(text) != decimal(&format!("{value:e}"))).then_some("not exactly a double")
}

/// A decimal number as (negative, significant digits, exponent of the last digit):
/// `1.50e2` is (false, "15", 1); zero is (false, "", 0).
fn decimal(text: &str) -> (bool, String, i64) {
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i64>().unwrap_or(0)),
        None => (text, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{whole}{fraction}");
    let mut exponent = exponent - fraction.len() as i64;
    let trimmed_end = digits.trim_end_matches('0');
    exponent += (digits.len() - trimmed_end.len()) as i64;
    let significant = trimmed_end.trim_start_matches('0').to_owned();
    match significant.is_empty() {
        true => (false, String::new(), 0),
        false => (negative, significant, exponent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_a_double_holds_pass() {
        for json in [
            r#"{"a": 1, "b": -9007199254740991, "c": 9007199254740991}"#,
            r#"[0.1, 1.5, 1.50, 1e3, 1E+3, 2.5e-3, -0, 0.0, 1e16, 123.456]"#,
            r#"{"s": "1234567890123456789", "e": "1.00000000000000000001"}"#,
            r#"[1.7976931348623157e308, 5e-324]"#,
        ] {
            assert_eq!(first_inexact_number(json), None, "{json}");
        }
    }

    #[test]
    fn numbers_a_double_changes_are_named() {
        for (json, number) in [
            (r#"{"user_id": 1234567890123456789}"#, "1234567890123456789"),
            (r#"[9007199254740992]"#, "9007199254740992"),
            (r#"[-9007199254740993]"#, "-9007199254740993"),
            (r#"[1.00000000000000000001]"#, "1.00000000000000000001"),
            (r#"[0.30000000000000000001]"#, "0.30000000000000000001"),
            (r#"{"big": 1e400}"#, "1e400"),
            (
                r#"{"k\"": [2, 12345678901234567890]}"#,
                "12345678901234567890",
            ),
        ] {
            assert_eq!(
                first_inexact_number(json).map(|(n, _)| n).as_deref(),
                Some(number),
                "{json}"
            );
        }
    }

    #[test]
    fn decimals_compare_by_value() {
        assert_eq!(decimal("1.50e2"), (false, "15".into(), 1));
        assert_eq!(decimal("150"), decimal("1.5e2"));
        assert_eq!(decimal("0.001"), decimal("1e-3"));
        assert_eq!(decimal("-0.0"), decimal("0"));
    }
}
