//! Batches of a canister's declared writes ([`writes!`](crate::writes)): the keyed client
//! batch in Candid (`execute_writes`, the writes by name with named fields) and in the generic
//! packed format (`execute_writes_packed`), both derived from the declaration by
//! `client_batches!`, both exactly once under the caller's key, and
//! one digest of the ops for both (their packed form), so a retry through either method is
//! recognised.
//!
//! What is refused whole, before anything runs, with a typed [`BatchRefusal`]: a caller who may
//! not write, or a batch holding a write for controllers only from someone else
//! (`NotAuthorized`); more than [`MAX_DECLARED_BATCH_OPS`] ops, a key of the anonymous
//! principal, a key outside its window or reused for other ops (`Refused`); a parameter of the
//! wrong type, `NULL` where not nullable, or past its size limit (`InvalidParam`, naming the op,
//! the write and the parameter); a packed request for another declaration
//! (`DeclarationMismatch`, both digests) or not of the format (`Malformed`, the byte offset).
//!
//! Where the author wants them, the same declaration gives one write per call
//! (`single_writes!`): `execute_write(op)` runs it now in its own transaction (`execute`),
//! `submit_write(op)` queues it for the next flush (`submit`, the crate's root `submit`, which a
//! method of the canister's own calls too); [`single_op`] checks it as a batch's op 0. Those
//! functions, and the batch methods' (`execute_writes`, `execute_writes_packed`), exist on wasm32
//! only.

use batch_core::{BatchDigest, SqlValue, Statement, WriteOp};
use batch_types::declare::{Access, BatchRefusal, Declaration, Writes, packed_ops};
use batch_types::packed::{self, RequestHeader};
use batch_types::{SqlParam, WriteError};

/// Most ops one batch of declared writes holds (as the reference canister's client batches).
pub const MAX_DECLARED_BATCH_OPS: usize = 10_000;

/// A batch of declared writes, checked and ready to run under its key.
#[derive(Debug, PartialEq)]
pub struct DeclaredBatch {
    /// The digest of the ops in their packed form (what a retry must repeat).
    pub digest: BatchDigest,
    /// The ops as batch_core runs them.
    pub ops: Vec<WriteOp>,
    /// A write of the batch is for controllers only.
    pub needs_controller: bool,
}

/// Checks `ops` (decoded from Candid) against their declaration and converts them.
pub fn candid_batch<W: Writes>(ops: Vec<W>) -> Result<DeclaredBatch, BatchRefusal> {
    too_many(ops.len())?;
    let digest = BatchDigest::of_bytes(&packed_ops(&ops));
    let declaration = W::declaration();
    let mut out = Vec::with_capacity(ops.len());
    let mut needs_controller = false;
    for (i, op) in ops.into_iter().enumerate() {
        let write = op.index();
        let params = op.into_params();
        out.push(checked(
            declaration,
            i,
            write,
            params,
            &mut needs_controller,
        )?);
    }
    Ok(DeclaredBatch {
        digest,
        ops: out,
        needs_controller,
    })
}

/// Reads a packed request for `declaration`: its key, and its ops checked and converted.
pub fn packed_batch(
    declaration: &Declaration,
    request: &[u8],
) -> Result<(RequestHeader, DeclaredBatch), BatchRefusal> {
    let (header, body) = packed::read_header(request)?;
    if header.digest != declaration.digest {
        return Err(BatchRefusal::DeclarationMismatch {
            canister: declaration.digest.to_vec().into(),
            request: header.digest.to_vec().into(),
        });
    }
    let ops = packed::read_ops(declaration, body, MAX_DECLARED_BATCH_OPS)?;
    let mut out = Vec::with_capacity(ops.len());
    let mut needs_controller = false;
    for (i, op) in ops.into_iter().enumerate() {
        out.push(checked(
            declaration,
            i,
            op.write,
            op.params,
            &mut needs_controller,
        )?);
    }
    Ok((
        header,
        DeclaredBatch {
            digest: BatchDigest::of_bytes(body),
            ops: out,
            needs_controller,
        },
    ))
}

/// Checks one declared write as op 0 of its own batch and converts it: a parameter not as
/// declared is `Invalid` naming the write and the parameter (the submit family refuses with a
/// [`WriteError`], as every submit method does); the op and whether it is for controllers only.
pub fn single_op<W: Writes>(op: W) -> Result<(WriteOp, bool), WriteError> {
    let write = op.index();
    let params = op.into_params();
    let mut needs_controller = false;
    checked(W::declaration(), 0, write, params, &mut needs_controller)
        .map(|op| (op, needs_controller))
        .map_err(|refusal| match refusal {
            BatchRefusal::InvalidParam(invalid) => WriteError::Invalid(invalid.to_string()),
            BatchRefusal::Refused(error) => error,
            other => WriteError::Invalid(other.to_string()),
        })
}

fn too_many(ops: usize) -> Result<(), BatchRefusal> {
    if ops > MAX_DECLARED_BATCH_OPS {
        return Err(BatchRefusal::Refused(WriteError::Invalid(format!(
            "{ops} ops in one batch; the limit is {MAX_DECLARED_BATCH_OPS}"
        ))));
    }
    Ok(())
}

fn checked(
    declaration: &Declaration,
    op: usize,
    write: usize,
    params: Vec<SqlParam>,
    needs_controller: &mut bool,
) -> Result<WriteOp, BatchRefusal> {
    declaration.check(op, write, &params)?;
    let decl = &declaration.writes[write];
    *needs_controller |= decl.access == Access::Controllers;
    Ok(WriteOp::Single(Statement::new(
        decl.sql,
        params.into_iter().map(sql_value).collect(),
    )))
}

/// A Candid SQL parameter as batch_core binds it.
pub fn sql_value(param: SqlParam) -> SqlValue {
    match param {
        SqlParam::Null => SqlValue::Null,
        SqlParam::Integer(v) => SqlValue::Integer(v),
        SqlParam::Real(v) => SqlValue::Real(v),
        SqlParam::Text(v) => SqlValue::Text(v),
        SqlParam::Blob(v) => SqlValue::Blob(v),
    }
}

#[cfg(target_arch = "wasm32")]
mod canister {
    use batch_core::{BatchKey, Outcome, Ticket, WriteOp};
    use batch_types::WriteError;
    use batch_types::declare::{BatchRefusal, Writes, WritesReply};
    use batch_types::packed;

    use super::DeclaredBatch;
    use crate::canister::{caller_is_controller, execute_batch_keyed, submit_op, write_now};
    use crate::keyed::{KeyedBatch, KeyedOutcomes};

    /// Runs `batch` under `key` of the caller, exactly once.
    fn run(key: BatchKey, batch: DeclaredBatch) -> Result<KeyedOutcomes, BatchRefusal> {
        if batch.needs_controller && !caller_is_controller() {
            return Err(BatchRefusal::NotAuthorized);
        }
        let DeclaredBatch { digest, ops, .. } = batch;
        Ok(execute_batch_keyed(KeyedBatch { key, digest, ops })?)
    }

    /// One declared write, checked, by a caller who may call it (a write for controllers only
    /// is `NotAuthorized` for anyone else).
    fn single<W: Writes>(op: W) -> Result<WriteOp, WriteError> {
        let (op, needs_controller) = super::single_op(op)?;
        if needs_controller && !caller_is_controller() {
            return Err(WriteError::NotAuthorized);
        }
        Ok(op)
    }

    /// Queues one declared write for the next flush, from a method of the canister's own
    /// ([`update!`](crate::update)) or `single_writes!`'s `submit_write`: checked against its
    /// declaration (a parameter not as declared is `Invalid`, naming the write and the
    /// parameter; a write for controllers only is `NotAuthorized` for anyone else), then
    /// queued with the caller as its owner ([`submit_op`]). Answers its ticket, whose status
    /// (`ticket_status`) tells its outcome once flushed.
    pub fn submit<W: Writes>(op: W) -> Result<Ticket, WriteError> {
        submit_op(single(op)?)
    }

    /// `execute_write`: runs one declared write now, in its own transaction ([`write_now`]),
    /// checked as [`submit`] checks it.
    pub fn execute<W: Writes>(op: W) -> Result<Outcome, WriteError> {
        write_now(single(op)?)
    }

    /// `execute_writes`: a keyed batch of declared writes in Candid.
    pub fn execute_writes<W: Writes>(
        key: BatchKey,
        ops: Vec<W>,
    ) -> Result<WritesReply, BatchRefusal> {
        let KeyedOutcomes {
            outcomes,
            duplicate,
        } = run(key, super::candid_batch(ops)?)?;
        Ok(WritesReply {
            outcomes,
            duplicate,
        })
    }

    /// `execute_writes_packed`: a keyed batch of declared writes in the generic packed format;
    /// answers the packed outcomes.
    pub fn execute_writes_packed<W: Writes>(request: &[u8]) -> Result<Vec<u8>, BatchRefusal> {
        let (header, batch) = super::packed_batch(W::declaration(), request)?;
        let outcomes = run(header.key, batch)?;
        Ok(packed::encode_reply(outcomes.duplicate, &outcomes.outcomes))
    }
}

#[cfg(target_arch = "wasm32")]
pub use canister::{execute, execute_writes, execute_writes_packed, submit};

#[cfg(test)]
mod tests;
