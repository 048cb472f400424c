//! The client's batches are what the todo store reads: the request carries the declaration's
//! digest, the key and each op by its declared types, and the packed reply reads back as one
//! outcome per op.

use batch_types::declare::{Blob, PackedWritesResult, Writes};
use batch_types::packed;
use ic_batch_client::{BatchKey, Outcome, Reply};
use todo_client::{TodoWrite, batch_argument, batch_reply};

#[test]
fn a_batch_is_the_todo_store_s_request_and_its_reply_reads_back() {
    let key = BatchKey {
        created_at_time: 1_700_000_000_000_000_000,
        id: [9; 16],
    };
    let ops = vec![
        TodoWrite::add {
            title: "milk".into(),
            due_ns: None,
        },
        TodoWrite::complete { id: 1 },
        TodoWrite::rename {
            id: 1,
            title: "oat milk".into(),
        },
    ];
    let argument = batch_argument(&key, &ops);
    let request: Blob = candid::decode_one(&argument).expect("execute_writes_packed's blob");
    let (header, body) = packed::read_header(&request).expect("a request");
    assert_eq!(header.key, key);
    assert_eq!(header.digest, TodoWrite::declaration().digest);
    let read = packed::read_ops(TodoWrite::declaration(), body, ops.len()).expect("the ops");
    let expected: Vec<_> = ops.iter().cloned().map(Writes::into_params).collect();
    assert_eq!(
        read.into_iter().map(|op| op.params).collect::<Vec<_>>(),
        expected
    );

    let outcomes = vec![
        Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 1,
        },
        Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 0,
        },
        Outcome::NotExecuted,
    ];
    let reply = candid::encode_one(PackedWritesResult::Ok(Blob::from(packed::encode_reply(
        false, &outcomes,
    ))))
    .unwrap();
    assert_eq!(
        batch_reply(&reply, ops.len()).unwrap(),
        Reply::Executed {
            outcomes,
            duplicate: false
        }
    );
}
