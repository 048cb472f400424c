//! A canister's input queues, in the replica's shape (`rs/replicated_state/src/canister_state/
//! queues/input_schedule.rs`): ingress messages in one queue; messages from canisters in one
//! queue per sender, those of the same subnet apart from those of other subnets. Each pop
//! rotates round-robin between the three sources (local canisters, ingress, remote canisters),
//! and within the canister sources between the senders, so that no sender and no source starves
//! the others. A canister alone on its subnet calling itself sees one FIFO queue.

use std::collections::{BTreeMap, VecDeque};

use crate::messages::{Ingress, Request, Response};

/// A message waiting for execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    Ingress(Ingress),
    Request(Request),
    Response(Response),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Source {
    #[default]
    LocalSubnet,
    Ingress,
    RemoteSubnet,
}

impl Source {
    fn next(self) -> Source {
        match self {
            Source::LocalSubnet => Source::Ingress,
            Source::Ingress => Source::RemoteSubnet,
            Source::RemoteSubnet => Source::LocalSubnet,
        }
    }
}

/// The queues of one source of canister messages: a FIFO queue per sender, and the senders
/// with messages in round-robin order.
#[derive(Debug, Default)]
struct Senders {
    queues: BTreeMap<Vec<u8>, VecDeque<Input>>,
    schedule: VecDeque<Vec<u8>>,
}

impl Senders {
    fn push(&mut self, sender: &[u8], input: Input) {
        let queue = self.queues.entry(sender.to_vec()).or_default();
        if queue.is_empty() {
            self.schedule.push_back(sender.to_vec());
        }
        queue.push_back(input);
    }

    fn pop(&mut self) -> Option<Input> {
        let sender = self.schedule.pop_front()?;
        let queue = self.queues.get_mut(&sender)?;
        let input = queue.pop_front();
        if queue.is_empty() {
            self.queues.remove(&sender);
        } else {
            self.schedule.push_back(sender);
        }
        input
    }

    fn len(&self) -> usize {
        self.queues.values().map(VecDeque::len).sum()
    }

    fn retain(&mut self, mut keep: impl FnMut(&Input) -> bool) {
        for queue in self.queues.values_mut() {
            queue.retain(&mut keep);
        }
        self.queues.retain(|_, q| !q.is_empty());
        let queues = &self.queues;
        self.schedule.retain(|s| queues.contains_key(s));
    }

    fn iter(&self) -> impl Iterator<Item = &Input> {
        self.queues.values().flatten()
    }
}

/// The input queues of a canister.
#[derive(Debug, Default)]
pub(crate) struct InputQueues {
    ingress: VecDeque<Ingress>,
    local: Senders,
    remote: Senders,
    next_source: Source,
}

impl InputQueues {
    /// Queues a message from canister `sender` of this subnet (`remote` false) or of another.
    pub fn push(&mut self, sender: &[u8], input: Input, remote: bool) {
        if remote {
            self.remote.push(sender, input);
        } else {
            self.local.push(sender, input);
        }
    }

    /// Queues an ingress message.
    pub fn push_ingress(&mut self, ingress: Ingress) {
        self.ingress.push_back(ingress);
    }

    /// The next message, rotating between the sources as the replica's `pop_input` does.
    pub fn pop(&mut self) -> Option<Input> {
        for _ in 0..3 {
            let source = self.next_source;
            self.next_source = source.next();
            let input = match source {
                Source::LocalSubnet => self.local.pop(),
                Source::Ingress => self.ingress.pop_front().map(Input::Ingress),
                Source::RemoteSubnet => self.remote.pop(),
            };
            if input.is_some() {
                return input;
            }
        }
        None
    }

    /// Number of queued messages.
    pub fn len(&self) -> usize {
        self.ingress.len() + self.local.len() + self.remote.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps the canister messages for which `keep` is true (ingress messages stay).
    pub fn retain(&mut self, mut keep: impl FnMut(&Input) -> bool) {
        self.local.retain(&mut keep);
        self.remote.retain(&mut keep);
    }

    /// Whether a response to `callback` is queued.
    pub fn has_response_for(&self, callback: u64) -> bool {
        self.local
            .iter()
            .chain(self.remote.iter())
            .any(|i| matches!(i, Input::Response(r) if r.callback == callback))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::Payload;

    fn response(from: u8, callback: u64) -> Input {
        Input::Response(Response {
            originator: vec![0],
            respondent: vec![from],
            callback,
            payload: Payload::Reply(vec![]),
            refund: 0,
            deadline: 0,
        })
    }

    fn ingress(n: u8) -> Ingress {
        Ingress {
            id: vec![n],
            sender: vec![4],
            receiver: vec![0],
            method: "m".into(),
            payload: vec![],
        }
    }

    fn callback_of(i: &Input) -> u64 {
        match i {
            Input::Response(r) => r.callback,
            Input::Ingress(m) => 100 + m.id[0] as u64,
            Input::Request(r) => r.callback,
        }
    }

    #[test]
    fn one_sender_is_a_fifo_queue() {
        let mut q = InputQueues::default();
        for cb in 1..=3 {
            q.push(&[7], response(7, cb), false);
        }
        let order: Vec<u64> = std::iter::from_fn(|| q.pop())
            .map(|i| callback_of(&i))
            .collect();
        assert_eq!(order, [1, 2, 3]);
    }

    #[test]
    fn sources_and_senders_take_turns() {
        let mut q = InputQueues::default();
        q.push(&[1], response(1, 1), false);
        q.push(&[1], response(1, 2), false);
        q.push(&[2], response(2, 3), false);
        q.push_ingress(ingress(1));
        q.push_ingress(ingress(2));
        q.push(&[9], response(9, 4), true);
        assert_eq!(q.len(), 6);
        let order: Vec<u64> = std::iter::from_fn(|| q.pop())
            .map(|i| callback_of(&i))
            .collect();
        // local (sender 1), ingress, remote, local (sender 2), ingress, local (sender 1).
        assert_eq!(order, [1, 101, 4, 3, 102, 2]);
        assert!(q.is_empty());
    }

    #[test]
    fn retain_drops_messages_and_empty_senders() {
        let mut q = InputQueues::default();
        q.push(&[1], response(1, 1), false);
        q.push(&[2], response(2, 2), false);
        assert!(q.has_response_for(2));
        q.retain(|i| callback_of(i) != 1);
        assert!(!q.has_response_for(1));
        assert_eq!(q.len(), 1);
        assert_eq!(q.pop().map(|i| callback_of(&i)), Some(2));
        assert_eq!(q.pop(), None);
    }
}
