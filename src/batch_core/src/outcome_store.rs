//! The bounded store of op outcomes, by ticket.

use std::collections::VecDeque;

use crate::op::{OpOutcome, Ticket};

#[cfg(test)]
mod tests;

/// Outcomes in increasing ticket order, at most `capacity` of them. When full, the outcome with
/// the oldest (smallest) ticket is evicted first. Because ops are flushed in ticket order, this
/// is also the outcome recorded first.
#[derive(Clone, Debug, Default)]
pub(crate) struct OutcomeStore {
    entries: VecDeque<(Ticket, OpOutcome)>,
    capacity: usize,
}

impl OutcomeStore {
    /// An empty store keeping at most `capacity` outcomes.
    pub(crate) fn new(capacity: usize) -> Self {
        OutcomeStore {
            entries: VecDeque::new(),
            capacity,
        }
    }

    /// Records the outcome of `ticket`, which must be larger than every stored ticket; evicts the
    /// oldest outcomes beyond the capacity. Amortized O(1).
    pub(crate) fn insert(&mut self, ticket: Ticket, outcome: OpOutcome) {
        debug_assert!(self.entries.back().is_none_or(|(last, _)| *last < ticket));
        self.entries.push_back((ticket, outcome));
        self.set_capacity(self.capacity);
    }

    /// Changes the capacity, evicting the oldest outcomes beyond it.
    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        while self.entries.len() > self.capacity {
            self.entries.pop_front();
        }
    }

    /// The stored outcome of `ticket`. O(log n).
    pub(crate) fn get(&self, ticket: Ticket) -> Option<&OpOutcome> {
        self.entries
            .binary_search_by_key(&ticket, |(t, _)| *t)
            .ok()
            .map(|index| &self.entries[index].1)
    }

    /// Number of stored outcomes.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The stored outcomes, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &(Ticket, OpOutcome)> {
        self.entries.iter()
    }

    /// The stored outcomes, oldest first, as stored.
    pub(crate) fn entries(&self) -> &VecDeque<(Ticket, OpOutcome)> {
        &self.entries
    }
}
