//! A lever's build (`scripts/levers.sh`, the feature `levers`): the reference's pragmas and
//! statement cache with the settings its environment names, read at compile time.

/// `bench_api::schema::PRAGMAS` with some values replaced, in its order (`None` keeps the
/// reference's value).
pub const fn pragmas_with(values: [Option<&'static str>; 6]) -> [(&'static str, &'static str); 6] {
    let mut out = bench_api::schema::PRAGMAS;
    let mut i = 0;
    while i < out.len() {
        if let Some(v) = values[i] {
            out[i].1 = v;
        }
        i += 1;
    }
    out
}

/// `text` read as a decimal count, or `reference` when `None`; a build that names something
/// else fails to compile (a `const` panic) rather than measure another setting than the one
/// it was asked for.
pub const fn count_or(text: Option<&str>, reference: usize) -> usize {
    let Some(text) = text else {
        return reference;
    };
    let bytes = text.as_bytes();
    assert!(!bytes.is_empty(), "a count must have digits");
    let mut n: usize = 0;
    let mut i = 0;
    while i < bytes.len() {
        let d = bytes[i];
        assert!(d.is_ascii_digit(), "a count must be decimal digits");
        n = n * 10 + (d - b'0') as usize;
        i += 1;
    }
    n
}
