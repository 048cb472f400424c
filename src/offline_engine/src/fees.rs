//! The Internet Computer's cycles fee schedule as data, and the cost of messages under it: the
//! one copy of the fees in the repository. The engine answers `ic0.cost_*` with it; the benchmark
//! suite prices messages with it and prints its formulas from it.
//!
//! Source: `CyclesAccountManagerConfig::application_subnet()` in dfinity/ic
//! `rs/config/src/subnet_config.rs` and the formulas of `rs/cycles_account_manager`; the
//! [cycles cost formulas](https://internetcomputer.org/docs/references/cycles-cost-formulas)
//! (the 2025 pricing: 5 M cycles per executed message, 1 cycle per instruction). Fees are given
//! for a 13-node subnet and scale by `n / 13` with integer division applied to each *summed* fee,
//! as the replica does. See `METERING.md` §8.

use serde::Serialize;

/// A fee schedule (13-node reference values) plus the XDR→USD rate used to price cycles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FeeSchedule {
    /// Where the figures come from.
    pub source: &'static str,
    /// The date the schedule (and the USD rate) is stated for.
    pub date: &'static str,
    /// Subnet size the fees below are given for (13).
    pub reference_nodes: u64,
    /// `update_message_execution_fee`: base fee per executed update message or system task.
    pub update_message_execution_fee: u128,
    /// `ten_update_instructions_execution_fee`: cycles per 10 instructions (wasm32).
    pub ten_update_instructions_execution_fee: u128,
    /// `ingress_message_reception_fee`: per ingress message, paid by the receiving canister.
    pub ingress_message_reception_fee: u128,
    /// `ingress_byte_reception_fee`: per ingress byte (argument + method name + nonce).
    pub ingress_byte_reception_fee: u128,
    /// `xnet_call_fee`: per inter-canister request (self-calls included), paid by the sender.
    pub xnet_call_fee: u128,
    /// `xnet_byte_transmission_fee`: per byte of an inter-canister request (method name + payload).
    pub xnet_byte_transmission_fee: u128,
    /// `canister_creation_fee`.
    pub canister_creation_fee: u128,
    /// `http_request_linear_baseline_fee`, per node of the subnet.
    pub http_request_linear_baseline_fee: u128,
    /// `http_request_quadratic_baseline_fee`, per node squared.
    pub http_request_quadratic_baseline_fee: u128,
    /// `http_request_per_byte_fee`, per request byte and node.
    pub http_request_per_byte_fee: u128,
    /// `http_response_per_byte_fee`, per byte of the maximal response and node.
    pub http_response_per_byte_fee: u128,
    /// Fee of one threshold ECDSA or Schnorr signature or vetKD key derivation.
    pub threshold_signature_fee: u128,
    /// US dollars per XDR (1 T cycles = 1 XDR).
    pub usd_per_xdr: f64,
    /// The date of the USD rate.
    pub usd_rate_date: &'static str,
}

/// The application-subnet schedule in force since the 2025 repricing.
pub const IC_2025: FeeSchedule = FeeSchedule {
    source: "dfinity/ic rs/config/src/subnet_config.rs CyclesAccountManagerConfig::application_subnet(); \
             internetcomputer.org/docs/references/cycles-cost-formulas",
    date: "2025-05-22",
    reference_nodes: 13,
    update_message_execution_fee: 5_000_000,
    ten_update_instructions_execution_fee: 10,
    ingress_message_reception_fee: 1_200_000,
    ingress_byte_reception_fee: 2_000,
    xnet_call_fee: 260_000,
    xnet_byte_transmission_fee: 1_000,
    canister_creation_fee: 500_000_000_000,
    http_request_linear_baseline_fee: 3_000_000,
    http_request_quadratic_baseline_fee: 60_000,
    http_request_per_byte_fee: 400,
    http_response_per_byte_fee: 800,
    threshold_signature_fee: 10_000_000_000,
    usd_per_xdr: 1.354820,
    usd_rate_date: "May 22, 2025",
};

/// Largest payload of an inter-canister request or response, 2 MiB
/// (`MAX_INTER_CANISTER_PAYLOAD_IN_BYTES`): a call prepays the transmission of a response this
/// large.
pub const MAX_INTER_CANISTER_PAYLOAD_BYTES: u128 = 2 * 1024 * 1024;

/// Bytes of the nonce an agent adds to each ingress message. The IC counts the nonce in the
/// billed ingress size; agent-rs sends an 8-byte nonce, which we assume for every call.
pub const NONCE_BYTES: u64 = 8;

/// Cycles per XDR (1 T).
pub const CYCLES_PER_XDR: f64 = 1e12;

/// The two subnet sizes the report prices.
pub const SUBNET_SIZES: [u64; 2] = [13, 34];

/// `scale(x, n) = x · n / 13` with integer division (the replica's `scale_cost`).
pub fn scale(cycles: u128, nodes: u64) -> u128 {
    cycles * nodes as u128 / IC_2025.reference_nodes as u128
}

/// Billed size of an ingress message: argument bytes + method name bytes + [`NONCE_BYTES`].
pub fn ingress_bytes(arg_len: usize, method: &str) -> u64 {
    arg_len as u64 + method.len() as u64 + NONCE_BYTES
}

impl FeeSchedule {
    /// `scale(x, n)` against this schedule's reference size.
    pub fn scale(&self, cycles: u128, nodes: u64) -> u128 {
        cycles * nodes as u128 / self.reference_nodes as u128
    }

    /// Cycles of one executed update message or task that used `instructions` (billed, i.e.
    /// including dirty heap pages): `scale(base + 10·I/10, n)`. The replica prepays the message
    /// limit and refunds the unused part, which can move the result by ±1 cycle; we ignore that.
    pub fn execution_cost(&self, instructions: u64, nodes: u64) -> u128 {
        let raw = self.update_message_execution_fee
            + instructions as u128 * self.ten_update_instructions_execution_fee / 10;
        self.scale(raw, nodes)
    }

    /// Cycles of `instructions` alone, without the base fee: `scale(1·I, n)` (the instructions
    /// of a cleanup callback, which runs within the response's execution).
    pub fn instructions_cost(&self, instructions: u64, nodes: u64) -> u128 {
        self.scale(
            instructions as u128 * self.ten_update_instructions_execution_fee / 10,
            nodes,
        )
    }

    /// Cycles of transmitting a response of `bytes` payload bytes back to the caller:
    /// `scale(1,000·bytes, n)` (the caller prepays the largest response and is refunded the rest).
    pub fn response_transmission_cost(&self, bytes: u64, nodes: u64) -> u128 {
        self.scale(self.xnet_byte_transmission_fee * bytes as u128, nodes)
    }

    /// Cycles of receiving one ingress message of `bytes` billed bytes: `scale(1.2 M + 2,000·bytes, n)`.
    pub fn ingress_cost(&self, bytes: u64, nodes: u64) -> u128 {
        self.scale(
            self.ingress_message_reception_fee + self.ingress_byte_reception_fee * bytes as u128,
            nodes,
        )
    }

    /// Cycles of sending one inter-canister request of `bytes` (method name + payload):
    /// `scale(260 K + 1,000·bytes, n)`. The response prepayment is refunded when the (small)
    /// response arrives, so it is not counted.
    pub fn call_cost(&self, bytes: u64, nodes: u64) -> u128 {
        self.scale(
            self.xnet_call_fee + self.xnet_byte_transmission_fee * bytes as u128,
            nodes,
        )
    }

    /// What `ic0.cost_call` answers on a subnet of `nodes`: the request ([`call_cost`](Self::call_cost)
    /// of `method_len + payload_len` bytes) plus the prepayments for the largest response's
    /// transmission and for executing its callback with `callback_instructions`.
    pub fn cost_call(
        &self,
        method_len: u64,
        payload_len: u64,
        callback_instructions: u64,
        nodes: u64,
    ) -> u128 {
        let bytes = method_len.saturating_add(payload_len) as u128;
        self.scale(
            self.xnet_call_fee
                + self.xnet_byte_transmission_fee * bytes
                + self.xnet_byte_transmission_fee * MAX_INTER_CANISTER_PAYLOAD_BYTES,
            nodes,
        ) + self.execution_cost(callback_instructions, nodes)
    }

    /// What `ic0.cost_http_request` answers for a request of `request_bytes` and a response of
    /// at most `max_response_bytes` on a subnet of `nodes`:
    /// `(linear + quadratic·n)·n + (request_byte·request + response_byte·response)·n`.
    pub fn http_request_cost(
        &self,
        request_bytes: u64,
        max_response_bytes: u64,
        nodes: u64,
    ) -> u128 {
        let n = nodes as u128;
        (self.http_request_linear_baseline_fee + self.http_request_quadratic_baseline_fee * n) * n
            + (self.http_request_per_byte_fee * request_bytes as u128
                + self.http_response_per_byte_fee * max_response_bytes as u128)
                * n
    }

    /// The message-execution formula as text, from this schedule: `scale(5 M + 1·instructions, n)`.
    pub fn execution_formula(&self) -> String {
        format!(
            "scale({} + {}·instructions, n)",
            short(self.update_message_execution_fee),
            fraction(self.ten_update_instructions_execution_fee, 10)
        )
    }

    /// The ingress formula as text: `scale(1.2 M + 2,000·bytes, n)`.
    pub fn ingress_formula(&self) -> String {
        format!(
            "scale({} + {}·bytes, n)",
            short(self.ingress_message_reception_fee),
            short(self.ingress_byte_reception_fee)
        )
    }

    /// The inter-canister call formula as text: `scale(260 K + 1,000·bytes, n)`.
    pub fn call_formula(&self) -> String {
        format!(
            "scale({} + {}·bytes, n)",
            short(self.xnet_call_fee),
            short(self.xnet_byte_transmission_fee)
        )
    }

    /// US dollars of `cycles` at this schedule's XDR rate.
    pub fn usd(&self, cycles: u128) -> f64 {
        cycles as f64 / CYCLES_PER_XDR * self.usd_per_xdr
    }
}

/// `5_000_000` as `5 M`, `260_000` as `260 K`, `2_000` as `2,000`.
fn short(x: u128) -> String {
    let with = |v: u128, unit: u128, name: &str| {
        if v.is_multiple_of(unit) {
            format!("{} {name}", v / unit)
        } else {
            format!("{} {name}", v as f64 / unit as f64)
        }
    };
    match x {
        x if x >= 1_000_000 => with(x, 1_000_000, "M"),
        x if x >= 100_000 => with(x, 1_000, "K"),
        x if x >= 1_000 => format!("{},{:03}", x / 1_000, x % 1_000),
        x => x.to_string(),
    }
}

/// `10 / 10` as `1`, `5 / 10` as `0.5`.
fn fraction(numerator: u128, denominator: u128) -> String {
    if numerator.is_multiple_of(denominator) {
        (numerator / denominator).to_string()
    } else {
        (numerator as f64 / denominator as f64).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: FeeSchedule = IC_2025;

    #[test]
    fn scale_is_integer_division_of_the_sum() {
        assert_eq!(
            scale(F.update_message_execution_fee, 13),
            F.update_message_execution_fee
        );
        let sum = F.update_message_execution_fee + 7;
        assert_eq!(scale(sum, 34), sum * 34 / 13);
        // Scaling the sum is not the sum of the scaled parts (integer division).
        let (a, b) = (F.update_message_execution_fee, 1u128);
        assert!(scale(a + b, 34) >= scale(a, 34) + scale(b, 34));
        assert_eq!(scale(1, 34), 2);
        assert_eq!(scale(1, 13), 1);
    }

    #[test]
    fn execution_cost_follows_the_schedule() {
        let i = 1_234_567u64;
        let raw = F.update_message_execution_fee
            + i as u128 * F.ten_update_instructions_execution_fee / 10;
        assert_eq!(F.execution_cost(i, 13), raw);
        assert_eq!(F.execution_cost(i, 34), raw * 34 / 13);
        assert_eq!(F.execution_cost(0, 13), F.update_message_execution_fee);
    }

    #[test]
    fn ingress_counts_arg_method_and_nonce() {
        let bytes = ingress_bytes(30, "create_order");
        assert_eq!(bytes, 30 + "create_order".len() as u64 + NONCE_BYTES);
        let raw = F.ingress_message_reception_fee + F.ingress_byte_reception_fee * bytes as u128;
        assert_eq!(F.ingress_cost(bytes, 13), raw);
        assert_eq!(F.ingress_cost(bytes, 34), raw * 34 / 13);
    }

    #[test]
    fn call_cost_follows_the_schedule() {
        let raw = F.xnet_call_fee + F.xnet_byte_transmission_fee * 40;
        assert_eq!(F.call_cost(40, 13), raw);
        assert_eq!(F.call_cost(40, 34), raw * 34 / 13);
    }

    #[test]
    fn formulas_are_printed_from_the_schedule() {
        assert_eq!(F.execution_formula(), "scale(5 M + 1·instructions, n)");
        assert_eq!(F.ingress_formula(), "scale(1.2 M + 2,000·bytes, n)");
        assert_eq!(F.call_formula(), "scale(260 K + 1,000·bytes, n)");
        let cheaper = FeeSchedule {
            ten_update_instructions_execution_fee: 4,
            update_message_execution_fee: 590_000,
            ..F
        };
        assert_eq!(
            cheaper.execution_formula(),
            "scale(590 K + 0.4·instructions, n)"
        );
    }

    #[test]
    fn cost_call_adds_the_response_prepayments() {
        let c = F.cost_call(10, 30, 40_000_000_000, 13);
        assert_eq!(
            c,
            260_000 + 1_000 * 40 + 1_000 * 2 * 1024 * 1024 + 5_000_000 + 40_000_000_000
        );
        assert_eq!(
            F.http_request_cost(100, 1_000, 13),
            (3_000_000 + 60_000 * 13) * 13 + (400 * 100 + 800 * 1_000) * 13
        );
    }

    #[test]
    fn usd_uses_one_xdr_per_trillion_cycles() {
        let one_t = CYCLES_PER_XDR as u128;
        assert!((F.usd(one_t) - F.usd_per_xdr).abs() < 1e-12);
        assert!((F.usd(one_t / 2) - F.usd_per_xdr / 2.0).abs() < 1e-12);
    }
}
