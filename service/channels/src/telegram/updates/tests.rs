use super::*;
use crate::telegram::secret_tenant;

#[test]
fn only_askgate_bot_ids_are_routed() {
    let id = format!("{WEBHOOK_PATH}tg_0193a1b2c3d4e5f60718293a4b5c6d7e");
    assert_eq!(bot_id(&id), Some("tg_0193a1b2c3d4e5f60718293a4b5c6d7e"));
    for path in [
        "/telegram/webhook/",
        "/telegram/webhook/tg_",
        "/telegram/webhook/tg_0193a1b2c3d4e5f60718293a4b5c6d7",
        "/telegram/webhook/tg_0193a1b2c3d4e5f60718293a4b5c6d7e/x",
        "/telegram/webhook/sl_0193a1b2c3d4e5f60718293a4b5c6d7e",
        "/telegram/webhook/tg_0193a1b2c3d4e5f60718293a4b5c6d7g",
    ] {
        assert_eq!(bot_id(path), None, "{path}");
    }
}

#[test]
fn an_update_counts_only_from_the_bots_chat() {
    let target = |chat: &str| TelegramTarget {
        bot_user_id: 1,
        bot_username: "b".into(),
        chat_id: chat.into(),
        bot_token: String::new(),
        webhook_secret: String::new(),
    };
    let group = json!({ "id": -1001234, "type": "supergroup", "username": "OpsRoom" });
    assert!(same_chat(&group, &target("-1001234")));
    assert!(same_chat(&group, &target("@opsroom")));
    assert!(!same_chat(&group, &target("-1001235")));
    assert!(!same_chat(&json!({ "id": 42 }), &target("@opsroom")));
    assert!(!same_chat(&Value::Null, &target("-1001234")));
}

#[test]
fn a_secret_token_names_its_tenant_and_nothing_else_does() {
    use base64::Engine as _;
    let random = "A".repeat(43);
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    for tenant in ["", "acme", "a tenant/with:odd chars é"] {
        let token = format!("{}{random}", engine.encode(tenant));
        assert_eq!(secret_tenant(&token).as_deref(), Some(tenant));
    }
    assert_eq!(secret_tenant("short"), None);
    assert_eq!(secret_tenant(&format!("!!!{random}")), None);
}
