use serde_json::json;

use super::*;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// A record's body, written field by field with `seq` and `tenant` put in their
    /// places, is the RFC 8785 form of the fields with those two, whatever the keys
    /// are (below, between and after "seq" and "tenant", or those names themselves).
    #[test]
    fn a_body_is_the_canonical_form_of_its_fields_with_seq_and_tenant(
        keys in proptest::collection::vec("[ -~]{0,8}|seq|tenant|s|t|sequel|tenants|ß", 0..8),
        texts in proptest::collection::vec("\\PC{0,12}|[\u{0}-\u{1f}\"\\\\]{0,4}", 1..6),
        seq in 1u64..=(1u64 << 60),
        tenant in "\\PC{0,12}",
    ) {
        let mut fields = Map::new();
        for (i, (k, t)) in keys.iter().zip(texts.iter().cycle()).enumerate() {
            let value = match i % 2 {
                0 => json!(t),
                _ => json!({"z": t, "a": [1, null, true, -3, [t]], t.as_str(): false}),
            };
            fields.insert(k.clone(), value);
        }
        let mut whole = fields.clone();
        whole.insert("seq".into(), seq.into());
        whole.insert("tenant".into(), tenant.clone().into());
        proptest::prop_assert_eq!(
            body(&fields, seq, &tenant),
            serde_jcs::to_string(&Value::Object(whole)).expect("serialises")
        );
    }
}

fn entry(kind: &str) -> AuditEntry {
    let Value::Object(fields) =
        json!({ "kind": kind, "subject": "ana", "at": "2026-12-02T00:00:00.000Z" })
    else {
        unreachable!()
    };
    AuditEntry {
        tenant: "acme".into(),
        id: kind.into(),
        fields,
    }
}

fn chain(n: usize) -> Vec<AuditRecord> {
    let mut head = Head::default();
    (0..n)
        .map(|i| {
            let record = head.chain(&entry(&format!("k{i}")));
            head = Head::after(&record);
            record
        })
        .collect()
}

#[test]
fn a_chain_links_each_record_to_the_one_before() {
    let records = chain(3);
    assert_eq!(records[0].prev_hash, "");
    assert_eq!(records[1].prev_hash, records[0].hash);
    assert_eq!(
        records[0].body_json,
        r#"{"at":"2026-12-02T00:00:00.000Z","kind":"k0","seq":1,"subject":"ana","tenant":"acme"}"#
    );
    assert_eq!(
        records[0].hash,
        hex::encode(Sha256::digest(records[0].body_json.as_bytes()))
    );
    assert_eq!(verify(&records), Ok(3));
    // A run that starts after pruning verifies from where it starts.
    assert_eq!(verify(&records[1..]), Ok(2));
}

#[test]
fn a_changed_dropped_or_reordered_record_is_found() {
    let records = chain(4);
    let mut changed = records.clone();
    changed[2].body_json = changed[2].body_json.replace("ana", "eve");
    assert_eq!(verify(&changed).map_err(|b| b.seq), Err(3));
    let mut dropped = records.clone();
    dropped.remove(1);
    assert_eq!(verify(&dropped).map_err(|b| b.seq), Err(3));
    let mut swapped = records.clone();
    swapped.swap(1, 2);
    assert_eq!(verify(&swapped).map_err(|b| b.seq), Err(3));
    // Rehashing a changed record does not help: the next one's link breaks.
    let mut rehashed = records;
    rehashed[1].body_json = rehashed[1].body_json.replace("ana", "eve");
    rehashed[1].hash = link_hash(&rehashed[1].prev_hash, &rehashed[1].body_json);
    assert_eq!(verify(&rehashed).map_err(|b| b.seq), Err(3));
}
