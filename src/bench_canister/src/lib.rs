use ic_rusqlite::with_connection;

#[ic_cdk::init]
fn init() {
    with_connection(|c| {
        c.execute_batch("CREATE TABLE IF NOT EXISTS t(x INTEGER)").unwrap();
    });
}

#[ic_cdk::update]
fn add(x: i64) -> u64 {
    with_connection(|c| c.execute("INSERT INTO t(x) VALUES (?1)", [x]).unwrap() as u64)
}

#[ic_cdk::query]
fn count() -> i64 {
    with_connection(|c| c.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0)).unwrap())
}

ic_cdk::export_candid!();
