//! Pending ops survive upgrades bit for bit: 10,000 random amounts (NaN, ±inf, −0.0,
//! subnormals and extremes among them) and texts with NUL and emoji, through three upgrades,
//! end up in SQLite exactly as the same values written without the queue.

use bench_api::*;
use bench_suite::client::{CONTROLLER, Client, SplitMix64 as Rng};

/// The values the amounts are drawn from besides random bit patterns.
const SPECIAL: [f64; 12] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    -0.0,
    0.0,
    f64::MIN_POSITIVE,
    5e-324,
    -386.33000000000004,
    8.010306006949637e142,
    f64::MAX,
    f64::MIN,
    9_007_199_254_740_993.0,
];

fn amounts(n: usize) -> Vec<f64> {
    let mut rng = Rng(20261123);
    (0..n)
        .map(|i| match i % 4 {
            0 => SPECIAL[(rng.next_u64() % SPECIAL.len() as u64) as usize],
            1 => f64::from_bits(rng.next_u64()),
            2 => (rng.next_u64() % 2_000_000) as f64 / 100.0 - 10_000.0,
            _ => (rng.next_u64() as i64) as f64,
        })
        .collect()
}

fn bits(orders: &[Order]) -> Vec<u64> {
    orders.iter().map(|o| o.amount.to_bits()).collect()
}

#[test]
fn ten_thousand_pending_ops_survive_three_upgrades_bit_for_bit() {
    const N: usize = 10_000;
    let mut c = Client::install(InitArgs {
        flush_size: Some(2 * N as u64),
        max_pending: Some(2 * N as u64),
        max_delay_ms: Some(86_400_000),
        outcome_capacity: Some(2 * N as u64),
        ..Default::default()
    });
    assert_eq!(c.create_user("queued"), 1);
    assert_eq!(c.create_user("reference"), 2);
    let amounts = amounts(N);

    // The reference: the same values written at once (one client batch, no queue).
    let reference: Vec<UserOrderOp> = amounts
        .iter()
        .map(|&amount| UserOrderOp::CreateOrder { user_id: 2, amount })
        .collect();
    let reference =
        Result::from(c.update::<BatchResult, _>("execute_batch", (reference,))).unwrap();

    // The same values queued, with users whose names need exact bytes.
    let tickets: Vec<Ticket> = amounts
        .iter()
        .map(|&amount| c.submit_order(1, amount).expect("queued"))
        .collect();
    let names: Vec<String> = (0..20)
        .map(|i| {
            format!(
                "special{i:02}: nul\0inside, emoji 🦀🧪, é, {}",
                "ß".repeat(i)
            )
        })
        .collect();
    let user_tickets: Vec<Ticket> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let r = c.submit_as(
                CONTROLLER,
                "submit_create_user",
                (name, format!("special{i:02}@example.com")),
            );
            Result::from(r).expect("queued")
        })
        .collect();

    let settings = c.settings();
    for round in 1..=3 {
        let upgrade = c.upgrade(None);
        assert!(
            !upgrade.result.is_trap(),
            "upgrade {round}: {:?}",
            upgrade.result
        );
        let s = c.stats();
        assert_eq!(s.pending, (N + names.len()) as u64, "upgrade {round}");
        assert!(s.timer_armed);
        assert_eq!(c.settings(), settings);
        assert_eq!(c.ticket(tickets[N - 1]), TicketStatus::Pending);
    }

    let summary = Result::from(c.update::<FlushResult, _>("flush", ())).unwrap();
    assert_eq!(summary.remaining, 0, "{summary:?}");

    // Every op has the outcome the same value got without the queue, failures included (NaN
    // is bound as NULL and refused by NOT NULL in both).
    let mut failed = 0;
    let statuses = c.tickets(tickets[0], N as u64);
    assert_eq!(tickets[N - 1], tickets[0] + N as u64 - 1);
    for (i, status) in statuses.into_iter().enumerate() {
        match (status, &reference[i]) {
            (
                TicketStatus::Committed {
                    rows_changed: 1, ..
                },
                Outcome::Committed { .. },
            ) => {}
            (TicketStatus::Failed(queued), Outcome::Failed(direct)) => {
                assert_eq!(&queued, direct, "op {i}");
                failed += 1;
            }
            (queued, direct) => panic!("op {i} ({}): {queued:?} vs {direct:?}", amounts[i]),
        }
    }
    assert!(failed > 0 && failed < N / 4, "{failed} NaN amounts");
    // And every stored amount has the same bits.
    let queued = c.orders_of(1);
    let direct = c.orders_of(2);
    assert_eq!(queued.len(), N - failed);
    assert_eq!(bits(&queued), bits(&direct));
    // Infinities and the awkward decimals are among them, exactly.
    let stored: Vec<u64> = bits(&queued);
    for value in [
        f64::INFINITY,
        f64::NEG_INFINITY,
        -386.33000000000004,
        8.010306006949637e142,
    ] {
        assert!(stored.contains(&value.to_bits()), "{value}");
    }

    for (i, ticket) in user_tickets.iter().enumerate() {
        assert!(
            matches!(c.ticket(*ticket), TicketStatus::Committed { .. }),
            "user {i}"
        );
    }
    let users: Vec<User> =
        Result::from(c.query::<UsersResult, _>("users_by_email_prefix", ("special", 1_000u32)))
            .unwrap();
    let mut stored_names: Vec<String> = users.into_iter().map(|u| u.username).collect();
    stored_names.sort();
    assert_eq!(stored_names, names);
    assert!(c.traps().is_empty(), "{:?}", c.traps());
}

#[test]
fn non_finite_amounts_pending_at_an_upgrade_do_not_block_it() {
    let mut c = Client::install(InitArgs {
        flush_size: Some(100),
        ..Default::default()
    });
    c.create_user("f");
    let nan = c.submit_order(1, f64::NAN).unwrap();
    let inf = c.submit_order(1, f64::INFINITY).unwrap();
    let neg = c.submit_order(1, f64::NEG_INFINITY).unwrap();
    let upgrade = c.upgrade(None);
    assert!(!upgrade.result.is_trap(), "{:?}", upgrade.result);
    c.tick(1_000_000_000);
    assert_eq!(
        c.ticket(nan),
        TicketStatus::Failed(OpError {
            code: 1299,
            message: "NOT NULL constraint failed: orders.amount".into()
        })
    );
    assert!(matches!(c.ticket(inf), TicketStatus::Committed { .. }));
    assert!(matches!(c.ticket(neg), TicketStatus::Committed { .. }));
    let amounts: Vec<f64> = c.orders_of(1).iter().map(|o| o.amount).collect();
    assert_eq!(amounts, vec![f64::INFINITY, f64::NEG_INFINITY]);
}
