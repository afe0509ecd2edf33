//! The Ask deadline. tonic's transport answers an expired `grpc-timeout` with CANCELLED
//! "Timeout expired" and drops the handler; askgate must instead answer
//! DEADLINE_EXCEEDED / ASK_EXPIRED and broadcast `resolved EXPIRED`. So the handler
//! honours the caller's timeout itself, measured from the request's arrival.
//!
//! tonic's timeout layer starts its clock before the request reaches our layers and
//! polls the handler before its own timer, so a handler deadline taken from the same
//! arrival instant (stamped by [`stamp_arrival`]) always fires first.

use std::time::Duration;

use tokio::time::Instant;

/// The longest wait `--max-wait` accepts: 30 days.
pub const MAX_WAIT_SECS: u64 = 30 * 24 * 3600;

/// When the request reached the service stack.
#[derive(Debug, Clone, Copy)]
pub struct Arrival(pub Instant);

/// Tower `map_request` function: stamps the arrival instant on every request.
pub fn stamp_arrival(
    mut request: http::Request<tonic::body::Body>,
) -> http::Request<tonic::body::Body> {
    request.extensions_mut().insert(Arrival(Instant::now()));
    request
}

/// The deadline of a call: the caller's `grpc-timeout`, capped by the server's maximum
/// wait, from the call's arrival.
pub fn of<T>(request: &tonic::Request<T>, max_wait: Duration) -> Instant {
    let arrival = request
        .extensions()
        .get::<Arrival>()
        .map_or_else(Instant::now, |a| a.0);
    let timeout = request
        .metadata()
        .get("grpc-timeout")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_grpc_timeout)
        .map_or(max_wait, |t| t.min(max_wait));
    // A wait beyond what the clock can represent is no deadline in practice.
    arrival
        .checked_add(timeout)
        .unwrap_or_else(|| arrival + Duration::from_secs(MAX_WAIT_SECS))
}

/// Parses a `grpc-timeout` header value: at most 8 digits and a unit (H M S m u n).
pub fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse_grpc_timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_grpc_timeout("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse_grpc_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(
            parse_grpc_timeout("99999999u"),
            Some(Duration::from_micros(99_999_999))
        );
        assert_eq!(parse_grpc_timeout("7n"), Some(Duration::from_nanos(7)));
    }

    #[test]
    fn refuses_malformed_values() {
        for bad in ["", "S", "5", "5s", "-5S", "123456789S", "1.5S", "5 S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_server_maximum_caps_the_caller() {
        let mut request = tonic::Request::new(());
        let arrival = Instant::now();
        request.extensions_mut().insert(Arrival(arrival));
        assert_eq!(
            of(&request, Duration::from_secs(60)),
            arrival + Duration::from_secs(60)
        );
        request
            .metadata_mut()
            .insert("grpc-timeout", "2S".parse().expect("ascii"));
        assert_eq!(
            of(&request, Duration::from_secs(60)),
            arrival + Duration::from_secs(2)
        );
        assert_eq!(
            of(&request, Duration::from_secs(1)),
            arrival + Duration::from_secs(1)
        );
    }
}
