use super::*;

#[test]
fn counting_meter_advances_per_read() {
    let meter = CountingMeter::new(10);
    assert_eq!((meter.peek(), meter.reads()), (0, 0));
    assert_eq!(meter.instructions(), 0);
    assert_eq!(meter.instructions(), 10);
    meter.advance(5);
    assert_eq!(meter.peek(), 25);
    assert_eq!(meter.instructions(), 25);
    assert_eq!((meter.peek(), meter.reads()), (35, 3));
}

#[test]
fn counting_meter_saturates() {
    let meter = CountingMeter::new(u64::MAX);
    meter.instructions();
    meter.instructions();
    assert_eq!(meter.instructions(), u64::MAX);
}

#[test]
fn closures_are_meters() {
    let meter = || 42u64;
    let dyn_meter: &dyn InstructionMeter = &meter;
    assert_eq!(dyn_meter.instructions(), 42);
}
