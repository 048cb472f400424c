//! The bounded store of op outcomes, by ticket, with their submitters: full outcomes evicted
//! per submitter, and a longer history of who submitted each ticket and whether it committed.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::op::{Outcome, Owner, Ticket};

#[cfg(test)]
mod tests;

/// Outcomes in increasing ticket order, at most `capacity` of them, and the [`History`] of the
/// recorded tickets.
///
/// **Eviction is per submitter.** When more than `capacity` outcomes are kept, the oldest
/// outcome of the submitter that keeps the most is evicted (among submitters keeping as many,
/// the one whose newest kept outcome is newest, i.e. usually the one that just added one). So a
/// submitter's outcomes are never evicted by another submitter's: a caller that floods the
/// queue evicts its own, and only when every other submitter keeps at least as many outcomes
/// does anyone else lose one (many identities can still bring others down to their level).
///
/// Evicted entries stay in `entries` as `None` until they are more than half of it, then are
/// compacted away (amortized O(1) per eviction); lookups are a binary search.
#[derive(Clone, Debug, Default)]
pub(crate) struct OutcomeStore {
    /// Kept outcomes in ticket order, `None` once evicted (until compaction).
    entries: VecDeque<(Ticket, Owner, Option<Outcome>)>,
    /// Entries that are `Some`.
    live: usize,
    capacity: usize,
    /// While every kept outcome has one submitter: that submitter (`owners` and `by_size` are
    /// then empty, and the oldest entry is the one evicted). The common case costs no index.
    sole: Option<Owner>,
    /// With two or more submitters: per submitter, the tickets of its kept outcomes, oldest
    /// first.
    owners: BTreeMap<Owner, VecDeque<Ticket>>,
    /// With two or more submitters: `(kept outcomes, newest kept ticket, submitter)` for each;
    /// the last entry is the submitter evicted from.
    by_size: BTreeSet<(usize, Ticket, Owner)>,
    history: History,
}

/// Who submitted each recorded ticket and whether it committed: 8 bytes per ticket (the owner's
/// digest, whose lowest bit is always 0, with the committed flag in that bit), for the last
/// `capacity` recorded tickets. Tickets are recorded in order without gaps (ops leave the queue
/// from its front), so a ticket's record is at `ticket - base`.
#[derive(Clone, Debug, Default)]
pub(crate) struct History {
    base: Ticket,
    records: VecDeque<u64>,
    capacity: usize,
}

impl History {
    /// An empty history keeping at most `capacity` tickets.
    pub(crate) fn new(capacity: usize) -> Self {
        History {
            base: 0,
            records: VecDeque::new(),
            capacity,
        }
    }

    /// A history of `records` (as [`records`](Self::records) gives them) from ticket `base`,
    /// cut to its newest `capacity`.
    pub(crate) fn restore(base: Ticket, records: Vec<u64>, capacity: usize) -> Self {
        let mut history = History {
            base,
            records: records.into(),
            capacity,
        };
        history.set_capacity(capacity);
        history
    }

    /// Records `ticket`; if it does not follow the last recorded ticket (a queue restored from a
    /// format without history), the history starts again from it.
    fn push(&mut self, ticket: Ticket, owner: Owner, committed: bool) {
        if self.capacity == 0 {
            return;
        }
        if self.records.is_empty() || self.end() != ticket {
            self.records.clear();
            self.base = ticket;
        }
        self.records
            .push_back(owner.digest() | u64::from(committed));
        if self.records.len() > self.capacity {
            self.records.pop_front();
            self.base += 1;
        }
    }

    fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        while self.records.len() > capacity {
            self.records.pop_front();
            self.base += 1;
        }
    }

    /// The ticket after the last recorded one.
    fn end(&self) -> Ticket {
        self.base + self.records.len() as u64
    }

    /// Who submitted `ticket` and whether it committed, if it is still in the history.
    pub(crate) fn get(&self, ticket: Ticket) -> Option<(Owner, bool)> {
        let index = usize::try_from(ticket.checked_sub(self.base)?).ok()?;
        let record = *self.records.get(index)?;
        Some((Owner::from_digest(record & !1), record & 1 == 1))
    }

    /// The first ticket of the history (meaningful only if it is not empty).
    pub(crate) fn base(&self) -> Ticket {
        self.base
    }

    /// The records, oldest first: an owner digest with the committed flag in its lowest bit.
    pub(crate) fn records(&self) -> &VecDeque<u64> {
        &self.records
    }
}

impl OutcomeStore {
    /// An empty store keeping at most `capacity` outcomes and `history_capacity` history records.
    pub(crate) fn new(capacity: usize, history_capacity: usize) -> Self {
        OutcomeStore {
            capacity,
            history: History::new(history_capacity),
            ..OutcomeStore::default()
        }
    }

    /// Records the outcome of `ticket` (submitted by `owner`), which must be larger than every
    /// recorded ticket: in the history, and as a kept outcome, evicting per submitter beyond the
    /// capacity. O(log s) for s submitters with kept outcomes.
    pub(crate) fn insert(&mut self, ticket: Ticket, owner: Owner, outcome: Outcome) {
        self.history.push(ticket, owner, outcome.is_committed());
        self.keep(ticket, owner, outcome);
    }

    /// Keeps the outcome of `ticket` without recording it in the history (restoring a store).
    pub(crate) fn keep(&mut self, ticket: Ticket, owner: Owner, outcome: Outcome) {
        debug_assert!(self.entries.back().is_none_or(|(last, ..)| *last < ticket));
        if self.capacity == 0 {
            return;
        }
        self.entries.push_back((ticket, owner, Some(outcome)));
        self.live += 1;
        match self.sole {
            Some(sole) if sole == owner => {}
            None if self.owners.is_empty() => self.sole = Some(owner),
            Some(_) => {
                // A second submitter: from now on submitters are indexed and ranked.
                self.sole = None;
                for (ticket, owner, outcome) in &self.entries {
                    if outcome.is_some() {
                        self.owners.entry(*owner).or_default().push_back(*ticket);
                    }
                }
                self.rank_all();
            }
            None => {
                let kept = self.owners.entry(owner).or_default();
                let (count, newest) = (kept.len(), kept.back().copied());
                kept.push_back(ticket);
                if let Some(newest) = newest {
                    self.by_size.remove(&(count, newest, owner));
                }
                self.by_size.insert((count + 1, ticket, owner));
            }
        }
        while self.live > self.capacity {
            self.evict_one();
        }
    }

    /// Ranks every submitter in `by_size`.
    fn rank_all(&mut self) {
        self.by_size = self
            .owners
            .iter()
            .filter_map(|(owner, kept)| Some((kept.len(), *kept.back()?, *owner)))
            .collect();
    }

    /// Evicts the oldest outcome of the submitter that keeps the most.
    fn evict_one(&mut self) {
        if self.sole.is_some() {
            // One submitter: its oldest is the oldest entry (never an evicted one).
            if let Some(&(oldest, ..)) = self.entries.front() {
                self.forget(oldest);
            }
            if self.live == 0 {
                self.sole = None;
            }
            return;
        }
        let Some((_, _, owner)) = self.by_size.pop_last() else {
            return;
        };
        let Some(kept) = self.owners.get_mut(&owner) else {
            return;
        };
        let Some(oldest) = kept.pop_front() else {
            return;
        };
        match kept.back() {
            Some(&newest) => {
                self.by_size.insert((kept.len(), newest, owner));
            }
            None => {
                self.owners.remove(&owner);
                if self.owners.len() == 1 {
                    // One submitter left: no index needed.
                    self.sole = self.owners.keys().next().copied();
                    self.owners.clear();
                    self.by_size.clear();
                }
            }
        }
        self.forget(oldest);
    }

    /// Marks the entry of `ticket` evicted, dropping evicted entries from the front and
    /// compacting when they are more than half of the entries.
    fn forget(&mut self, ticket: Ticket) {
        let index = if self.entries.front().is_some_and(|(t, ..)| *t == ticket) {
            0
        } else {
            match self.entries.binary_search_by_key(&ticket, |(t, ..)| *t) {
                Ok(index) => index,
                Err(_) => return,
            }
        };
        if self.entries[index].2.take().is_some() {
            self.live -= 1;
        }
        while self.entries.front().is_some_and(|(.., o)| o.is_none()) {
            self.entries.pop_front();
        }
        if self.entries.len() > 2 * self.live + 16 {
            self.entries.retain(|(.., o)| o.is_some());
        }
    }

    /// Changes the capacity, evicting per submitter beyond it.
    pub(crate) fn set_capacity(&mut self, capacity: usize, history_capacity: usize) {
        self.capacity = capacity;
        while self.live > self.capacity {
            self.evict_one();
        }
        self.history.set_capacity(history_capacity);
    }

    /// The kept outcome of `ticket` and its submitter. O(log n).
    pub(crate) fn get(&self, ticket: Ticket) -> Option<(Owner, &Outcome)> {
        let index = self
            .entries
            .binary_search_by_key(&ticket, |(t, ..)| *t)
            .ok()?;
        let (_, owner, outcome) = &self.entries[index];
        outcome.as_ref().map(|o| (*owner, o))
    }

    /// Number of kept outcomes.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// The kept outcomes with their tickets and submitters, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Ticket, Owner, &Outcome)> {
        self.entries
            .iter()
            .filter_map(|(t, owner, o)| o.as_ref().map(|o| (*t, *owner, o)))
    }

    /// The history of recorded tickets.
    pub(crate) fn history(&self) -> &History {
        &self.history
    }

    /// Replaces the history (restoring a store).
    pub(crate) fn set_history(&mut self, history: History) {
        self.history = history;
    }
}
