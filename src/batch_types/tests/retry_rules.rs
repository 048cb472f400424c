//! The retry rule as the TypeScript client reads it (`testdata/retry_rules.json`): written from
//! [`batch_types::retry::RULES`] (`UPDATE_VECTORS=1 cargo test -p ic-rusqlite-batch-types --test
//! retry_rules`) and checked against it, so that a rule changed in Rust fails this test until
//! the file follows, and the TypeScript client's test of the file then fails until it does.

use batch_types::retry::RULES;
use serde_json::{Map, Value};

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/retry_rules.json");

#[test]
fn the_committed_rules_are_the_table() {
    let mut rules = Map::new();
    for (ty, variant, retry) in RULES {
        let by_variant = rules
            .entry(*ty)
            .or_insert_with(|| Value::Object(Map::new()));
        by_variant
            .as_object_mut()
            .expect("an object")
            .insert((*variant).into(), retry.name().into());
    }
    let text = serde_json::to_string_pretty(&Value::Object(rules)).unwrap() + "\n";
    if std::env::var_os("UPDATE_VECTORS").is_some() {
        std::fs::write(PATH, &text).unwrap();
    }
    let committed = std::fs::read_to_string(PATH)
        .expect("testdata/retry_rules.json (UPDATE_VECTORS=1 writes it)");
    assert_eq!(committed, text, "the committed rules differ from the table");
}
