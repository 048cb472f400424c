use super::*;

#[test]
fn manual_clock_moves_only_when_told() {
    let clock = ManualClock::new(100);
    assert_eq!(clock.now_ns(), 100);
    assert_eq!(clock.now_ns(), 100);
    clock.advance(50);
    assert_eq!(clock.now_ns(), 150);
    clock.set(7);
    assert_eq!(clock.now_ns(), 7);
    clock.advance(u64::MAX);
    assert_eq!(clock.now_ns(), u64::MAX);
    assert_eq!(ManualClock::default().now_ns(), 0);
}

#[test]
fn closures_are_clocks() {
    let clock = || 5u64;
    let dyn_clock: &dyn Clock = &clock;
    assert_eq!(dyn_clock.now_ns(), 5);
}
