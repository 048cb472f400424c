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
    fn read<M: InstructionMeter>(meter: &M) -> (u64, u64) {
        (meter.instructions(), meter.instructions_while_running())
    }
    assert_eq!(read(&|| 42u64), (42, 42));
}

#[test]
fn statement_reads_advance_by_their_own_step() {
    let meter = CountingMeter::with_statement_step(10, 3);
    assert_eq!(meter.instructions(), 0);
    // A statement read returns the last read plus the statement steps since.
    assert_eq!(meter.instructions_while_running(), 3);
    assert_eq!(meter.instructions_while_running(), 6);
    // The next read includes them.
    assert_eq!(meter.instructions(), 16);
    assert_eq!((meter.reads(), meter.statement_reads()), (2, 2));
    // Without a statement step, statement reads return the last read.
    let plain = CountingMeter::new(10);
    plain.instructions();
    plain.instructions();
    assert_eq!(plain.instructions_while_running(), 10);
    assert_eq!(plain.peek(), 20);
}

#[test]
fn clones_share_the_counter() {
    let meter = CountingMeter::new(5);
    let clone = meter.clone();
    meter.instructions();
    assert_eq!(clone.instructions(), 5);
    assert_eq!(meter.reads(), 2);
}

#[test]
fn op_limit_is_twice_the_budget() {
    assert_eq!(Budget::new(|| 0u64, 7).op_limit(), 14);
    assert_eq!(Budget::new(|| 0u64, u64::MAX).op_limit(), u64::MAX);
}
