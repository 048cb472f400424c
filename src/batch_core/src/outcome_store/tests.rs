use super::*;
use crate::op::OpError;

fn outcome(n: u64) -> Outcome {
    Outcome::Committed {
        rows_changed: n,
        last_insert_rowid: 0,
    }
}

fn failed() -> Outcome {
    Outcome::Failed(OpError {
        code: 19,
        message: "constraint".into(),
    })
}

fn kept(store: &OutcomeStore) -> Vec<Ticket> {
    store.iter().map(|(t, ..)| t).collect()
}

#[test]
fn one_submitter_keeps_its_newest_and_evicts_its_oldest_first() {
    let owner = Owner::of(b"alice");
    let mut store = OutcomeStore::new(3, 100);
    for ticket in 1..=5 {
        store.insert(ticket, owner, outcome(ticket));
    }
    assert_eq!(store.len(), 3);
    assert_eq!(store.get(1), None);
    assert_eq!(store.get(2), None);
    assert_eq!(store.get(3), Some((owner, &outcome(3))));
    assert_eq!(store.get(5), Some((owner, &outcome(5))));
    assert_eq!(store.get(6), None);
    assert_eq!(kept(&store), vec![3, 4, 5]);
}

#[test]
fn gaps_are_not_found() {
    let mut store = OutcomeStore::new(10, 100);
    store.insert(2, Owner::NONE, outcome(2));
    store.insert(7, Owner::NONE, outcome(7));
    assert_eq!(store.get(2), Some((Owner::NONE, &outcome(2))));
    assert_eq!(store.get(5), None);
    assert_eq!(store.get(7), Some((Owner::NONE, &outcome(7))));
}

#[test]
fn zero_capacity_keeps_nothing_but_the_history() {
    let mut store = OutcomeStore::new(0, 10);
    store.insert(1, Owner::NONE, outcome(1));
    assert_eq!(store.len(), 0);
    assert_eq!(store.get(1), None);
    assert_eq!(store.history().get(1), Some((Owner::NONE, true)));
}

/// A flooding submitter evicts only its own outcomes: the victim's one outcome survives any
/// number of the flooder's.
#[test]
fn a_flood_evicts_the_flooders_outcomes_not_the_victims() {
    let victim = Owner::of(b"victim");
    let flooder = Owner::of(b"flooder");
    let mut store = OutcomeStore::new(100, 1_000);
    store.insert(1, victim, outcome(1));
    for ticket in 2..=10_000 {
        store.insert(ticket, flooder, outcome(ticket));
    }
    assert_eq!(store.len(), 100);
    assert_eq!(store.get(1), Some((victim, &outcome(1))));
    // The flooder keeps its newest 99.
    assert_eq!(store.get(9_901), None);
    assert_eq!(store.get(9_902), Some((flooder, &outcome(9_902))));
    let mut expected = vec![1];
    expected.extend(9_902..=10_000);
    assert_eq!(kept(&store), expected);
    // The evicted entries were compacted away: the store holds no more than it must.
    assert!(
        store.entries.len() <= 2 * store.live + 16,
        "{}",
        store.entries.len()
    );
}

/// With equal counts, the submitter that added last makes room: many identities with one
/// outcome each do not evict an older submitter's single outcome.
#[test]
fn among_equal_submitters_the_newest_makes_room() {
    let victim = Owner::of(b"victim");
    let mut store = OutcomeStore::new(10, 1_000);
    store.insert(1, victim, outcome(1));
    for ticket in 2..=500u64 {
        store.insert(ticket, Owner::of(&ticket.to_le_bytes()), outcome(ticket));
    }
    assert_eq!(store.len(), 10);
    assert_eq!(store.get(1), Some((victim, &outcome(1))));
    // A submitter above the others is brought down to their level, oldest first.
    let big = Owner::of(b"big");
    let mut store = OutcomeStore::new(4, 1_000);
    for ticket in 1..=3 {
        store.insert(ticket, big, outcome(ticket));
    }
    store.insert(4, victim, outcome(4));
    store.insert(5, Owner::of(b"third"), outcome(5));
    assert_eq!(kept(&store), vec![2, 3, 4, 5]);
    store.insert(6, Owner::of(b"fourth"), outcome(6));
    assert_eq!(kept(&store), vec![3, 4, 5, 6]);
    // Every submitter keeps one now: the newest one's own outcome makes room.
    store.insert(7, Owner::of(b"fifth"), outcome(7));
    assert_eq!(kept(&store), vec![3, 4, 5, 6]);
    assert_eq!(store.history().get(7), Some((Owner::of(b"fifth"), true)));
}

#[test]
fn the_history_remembers_the_submitter_and_the_commit_after_eviction() {
    let owner = Owner::of(b"alice");
    let mut store = OutcomeStore::new(1, 3);
    store.insert(10, owner, outcome(10));
    store.insert(11, owner, failed());
    store.insert(12, Owner::NONE, outcome(12));
    store.insert(13, owner, failed());
    // Three records: 11, 12, 13; ticket 10 is older than the history.
    assert_eq!(store.history().get(10), None);
    assert_eq!(store.history().get(11), Some((owner, false)));
    assert_eq!(store.history().get(12), Some((Owner::NONE, true)));
    assert_eq!(store.history().get(13), Some((owner, false)));
    assert_eq!(store.history().get(14), None);
    assert_eq!(store.history().base(), 11);
    // A gap (a queue restored without history) starts it again.
    store.insert(20, owner, outcome(20));
    assert_eq!(store.history().get(13), None);
    assert_eq!(store.history().get(20), Some((owner, true)));
}

#[test]
fn owners_differ_and_never_collide_with_none() {
    let a = Owner::of(b"a");
    assert_ne!(a, Owner::of(b"b"));
    assert_ne!(a, Owner::NONE);
    assert_ne!(Owner::of(b""), Owner::NONE);
    assert_eq!(a.digest() & 1, 0);
    assert_eq!(Owner::from_digest(a.digest() | 1), a);
    assert_eq!(Owner::of(b"a"), a, "the digest is stable");
    // The digest of a fixed identity never changes: saved queues depend on it.
    assert_eq!(
        Owner::of(&[0xC0, 0xFF, 0xEE, 0x01]).digest(),
        OWNER_OF_COFFEE
    );
}

/// `Owner::of(&[0xC0, 0xFF, 0xEE, 0x01])`, computed once: saved queues keep digests, so the
/// function must not change.
const OWNER_OF_COFFEE: u64 = 11_585_815_917_880_957_754;

proptest::proptest! {
    /// The store keeps exactly what the eviction rule says, computed the slow way: when full,
    /// drop the oldest outcome of the submitter with the most kept outcomes, ties going to the
    /// one whose newest kept outcome is newest.
    #[test]
    fn eviction_matches_the_rule(
        capacity in 0usize..8,
        submitters in proptest::collection::vec(0u8..4, 0..60),
    ) {
        let mut store = OutcomeStore::new(capacity, 100);
        let mut model: Vec<(Ticket, Owner)> = Vec::new();
        for (i, s) in submitters.iter().enumerate() {
            let ticket = i as Ticket + 1;
            let owner = Owner::of(&[*s]);
            store.insert(ticket, owner, outcome(ticket));
            if capacity > 0 {
                model.push((ticket, owner));
            }
            while model.len() > capacity {
                let mut best: Option<(usize, Ticket, Owner)> = None;
                for &(_, o) in &model {
                    let mine: Vec<Ticket> =
                        model.iter().filter(|(_, x)| *x == o).map(|(t, _)| *t).collect();
                    let key = (mine.len(), *mine.last().unwrap(), o);
                    if best.is_none_or(|b| key > b) {
                        best = Some(key);
                    }
                }
                let (_, _, victim) = best.unwrap();
                let at = model.iter().position(|(_, o)| *o == victim).unwrap();
                model.remove(at);
            }
            let tickets: Vec<Ticket> = model.iter().map(|(t, _)| *t).collect();
            proptest::prop_assert_eq!(kept(&store), tickets);
            proptest::prop_assert_eq!(store.len(), model.len());
        }
    }
}
