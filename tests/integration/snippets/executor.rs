use askgate_client::{Client, proto::Action, receipt};

/// Before the deploy runs: `client` holds an agent credential of tenant acme, `jwks` the
/// server's `/.well-known/jwks.json` (cached; fetched again on an unknown `kid`).
pub async fn check_deploy(
    client: &mut Client,
    jwks: &receipt::JwkSet,
    receipt_token: &str,
) -> Result<receipt::Claims, receipt::CheckError> {
    let deploy = Action {
        name: "deploy".into(),
        arguments_json: r#"{"service":"api","env":"prod"}"#.into(),
        ..Default::default()
    };
    let claims = receipt::verify_and_consume(client, receipt_token, jwks, "acme", &deploy).await?;
    println!(
        "approved by {:?}, asked by {}",
        claims.approvers, claims.asked_by
    );
    Ok(claims) // run the deploy
}
