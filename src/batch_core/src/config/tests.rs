use super::*;

#[test]
fn default_is_valid() {
    let config = Config::default();
    assert_eq!(config.validate(), Ok(()));
    assert_eq!(config.flush_size, 100);
    assert_eq!(config.max_delay_ns, 1_000_000_000);
    assert_eq!(config.max_pending, 10_000);
    assert_eq!(config.max_pending_bytes, 128 << 20);
    assert_eq!(config.flush_instruction_budget, 10_000_000_000);
    assert_eq!(config.outcome_capacity, 10_000);
}

#[test]
fn invalid_configs() {
    let base = Config::default();
    let cases = [
        (
            Config {
                flush_size: 0,
                ..base.clone()
            },
            ConfigError::ZeroFlushSize,
        ),
        (
            Config {
                max_pending: 0,
                ..base.clone()
            },
            ConfigError::ZeroMaxPending,
        ),
        (
            Config {
                flush_size: 11,
                max_pending: 10,
                ..base.clone()
            },
            ConfigError::FlushSizeAboveMaxPending {
                flush_size: 11,
                max_pending: 10,
            },
        ),
        (
            Config {
                flush_instruction_budget: 0,
                ..base.clone()
            },
            ConfigError::ZeroInstructionBudget,
        ),
    ];
    let zero_bytes = Config {
        max_pending_bytes: 0,
        ..base.clone()
    };
    assert_eq!(zero_bytes.validate(), Err(ConfigError::ZeroMaxPendingBytes));
    for (config, error) in cases {
        assert_eq!(config.validate(), Err(error));
    }
}

#[test]
fn edge_configs_are_valid() {
    let config = Config {
        flush_size: 1,
        max_delay_ns: 0,
        max_pending: 1,
        max_pending_bytes: 1,
        flush_instruction_budget: 1,
        outcome_capacity: 0,
        history_capacity: 0,
        coalesce_rows: 0,
    };
    assert_eq!(config.validate(), Ok(()));
}

#[test]
fn error_messages() {
    assert_eq!(
        ConfigError::ZeroFlushSize.to_string(),
        "flush_size must be at least 1"
    );
    assert_eq!(
        ConfigError::FlushSizeAboveMaxPending {
            flush_size: 5,
            max_pending: 4
        }
        .to_string(),
        "flush_size (5) must not exceed max_pending (4)"
    );
    assert_eq!(
        ConfigError::InvalidState { reason: "x".into() }.to_string(),
        "inconsistent queue state: x"
    );
    let error: Box<dyn std::error::Error> = Box::new(ConfigError::ZeroMaxPending);
    assert_eq!(error.to_string(), "max_pending must be at least 1");
}

#[test]
fn serde_round_trip() {
    let config = Config {
        flush_size: 3,
        ..Config::default()
    };
    let json = serde_json::to_string(&config).unwrap();
    assert_eq!(serde_json::from_str::<Config>(&json).unwrap(), config);
}

#[test]
fn a_flush_uses_at_most_three_budgets() {
    let config = Config {
        flush_instruction_budget: 7,
        ..Config::default()
    };
    assert_eq!(config.max_flush_instructions(), 21);
    assert_eq!(Config::default().max_flush_instructions(), 30_000_000_000);
    let huge = Config {
        flush_instruction_budget: u64::MAX / 2,
        ..Config::default()
    };
    assert_eq!(huge.max_flush_instructions(), u64::MAX);
}
