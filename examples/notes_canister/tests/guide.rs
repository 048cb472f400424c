//! The guide (`docs/guide.md`) shows this canister's code: every Rust block in it is a part of
//! `src/lib.rs`, so the code a reader copies is the code the repository builds and tests.

#[test]
fn every_rust_block_of_the_guide_is_part_of_the_example() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("../../docs/guide.md")).unwrap();
    let code = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let mut blocks = 0;
    let mut rest = guide.as_str();
    while let Some(start) = rest.find("```rust\n") {
        let body = &rest[start + "```rust\n".len()..];
        let end = body.find("\n```").expect("a closed block");
        let block = &body[..end];
        assert!(
            code.contains(block),
            "this block of the guide is not in examples/notes_canister/src/lib.rs:\n{block}"
        );
        blocks += 1;
        rest = &body[end..];
    }
    assert!(
        blocks >= 4,
        "the guide shows the canister's code ({blocks} blocks)"
    );
}
