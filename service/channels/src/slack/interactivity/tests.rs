use super::*;

fn signed(secret: &str, timestamp: u64, body: &[u8]) -> HeaderMap {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    let mut message = format!("v0:{timestamp}:").into_bytes();
    message.extend_from_slice(body);
    let signature = hex::encode(ring::hmac::sign(&key, &message).as_ref());
    let mut headers = HeaderMap::new();
    headers.insert(
        "x-slack-request-timestamp",
        timestamp.to_string().parse().expect("header"),
    );
    headers.insert(
        "x-slack-signature",
        format!("v0={signature}").parse().expect("header"),
    );
    headers
}

#[test]
fn signatures_are_checked_with_the_secret_and_the_time() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let body = b"payload=%7B%7D";
    let good = signed("s3cret", 1_700_000_000, body);
    assert!(verify(&good, body, b"s3cret", now).is_ok());
    assert_eq!(verify(&good, body, b"other", now), Err(UNVERIFIED));
    assert_eq!(
        verify(&good, b"payload=%7B%7Dx", b"s3cret", now),
        Err(UNVERIFIED)
    );
    let old = signed("s3cret", 1_700_000_000 - 301, body);
    assert!(verify(&old, body, b"s3cret", now).is_err_and(|e| e.starts_with("stale")));
    let ahead = signed("s3cret", 1_700_000_000 + 301, body);
    assert!(verify(&ahead, body, b"s3cret", now).is_err_and(|e| e.starts_with("stale")));
    assert!(
        verify(&HeaderMap::new(), body, b"s3cret", now).is_err_and(|e| e.starts_with("unsigned"))
    );
    // One replay key however the signature's hex is spelled.
    let mut shouting = good.clone();
    let upper = good["x-slack-signature"]
        .to_str()
        .expect("ascii")
        .replacen("v0=", "", 1)
        .to_ascii_uppercase();
    shouting.insert(
        "x-slack-signature",
        format!("v0={upper}").parse().expect("header"),
    );
    assert_eq!(
        verify(&shouting, body, b"s3cret", now),
        verify(&good, body, b"s3cret", now)
    );
    let mut mangled = good.clone();
    mangled.insert("x-slack-signature", "v1=abc".parse().expect("header"));
    assert_eq!(
        verify(&mangled, body, b"s3cret", now),
        Err("a malformed signature")
    );
}

#[test]
fn the_ref_comes_from_the_form_the_control_or_the_message() {
    let at = Ref {
        tenant: "t".into(),
        app: "a".into(),
        session: "s".into(),
        rpc: "r".into(),
        option: Some(1),
    };
    let clicked = json!({ "type": "block_actions", "actions": [{ "value": at.encode() }] });
    assert_eq!(ref_of(&clicked), Some(at.clone()));
    let checked = json!({
        "type": "block_actions",
        "actions": [{ "action_id": "askgate.checks" }],
        "message": { "blocks": [{ "elements": [{ "type": "checkboxes" }, { "value": at.encode() }] }] },
    });
    assert_eq!(ref_of(&checked), Some(at.clone()));
    let form = json!({ "type": "view_submission", "view": { "private_metadata": at.encode() } });
    assert_eq!(ref_of(&form), Some(at));
    assert_eq!(
        ref_of(&json!({ "type": "block_actions", "actions": [{ "value": "x" }] })),
        None
    );
    let body = format!(
        "payload={}",
        form_urlencoded::byte_serialize(form.to_string().as_bytes()).collect::<String>()
    );
    assert_eq!(payload(body.as_bytes()), Some(form));
}
