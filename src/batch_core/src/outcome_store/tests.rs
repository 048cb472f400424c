use super::*;

fn outcome(n: u64) -> OpOutcome {
    OpOutcome::Committed {
        rows_changed: n,
        last_insert_rowid: 0,
    }
}

#[test]
fn keeps_the_newest_and_evicts_the_oldest_ticket_first() {
    let mut store = OutcomeStore::new(3);
    for ticket in 1..=5 {
        store.insert(ticket, outcome(ticket));
    }
    assert_eq!(store.len(), 3);
    assert_eq!(store.get(1), None);
    assert_eq!(store.get(2), None);
    assert_eq!(store.get(3), Some(&outcome(3)));
    assert_eq!(store.get(5), Some(&outcome(5)));
    assert_eq!(store.get(6), None);
    let tickets: Vec<Ticket> = store.iter().map(|(t, _)| *t).collect();
    assert_eq!(tickets, vec![3, 4, 5]);
}

#[test]
fn gaps_are_not_found() {
    let mut store = OutcomeStore::new(10);
    store.insert(2, outcome(2));
    store.insert(7, outcome(7));
    assert_eq!(store.get(2), Some(&outcome(2)));
    assert_eq!(store.get(5), None);
    assert_eq!(store.get(7), Some(&outcome(7)));
}

#[test]
fn zero_capacity_keeps_nothing() {
    let mut store = OutcomeStore::new(0);
    store.insert(1, outcome(1));
    assert_eq!(store.len(), 0);
    assert_eq!(store.get(1), None);
}
