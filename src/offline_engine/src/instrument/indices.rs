//! The indices the injected code refers to, and the re-encoder that makes room for the
//! injected imports.

use wasm_encoder::reencode::Reencode;

use super::dirty::DirtyHooks;
use super::pages::PageHooks;

/// Shifts function indices by the number of injected imports; everything else round-trips.
pub(super) struct Shift(pub(super) u32);

impl Reencode for Shift {
    type Error = std::convert::Infallible;
    fn function_index(
        &mut self,
        func: u32,
    ) -> Result<u32, wasm_encoder::reencode::Error<Self::Error>> {
        Ok(func + self.0)
    }
}

/// Indices the injected code refers to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Special {
    pub(super) counter_global: u32,
    pub(super) out_of_instructions: u32,
    pub(super) decrement_helper: u32,
    /// The written-page map: its memory index and helper, when the module has a memory.
    pub(super) dirty: Option<DirtyHooks>,
    /// The profiler's hooks, when profiling.
    pub(super) profile: Option<ProfileHooks>,
    /// The tracker map and its helpers, in profiles with the memory tracker and a heap.
    pub(super) pages: Option<PageHooks>,
}

/// The profiler's hooks: function indices of the injected imports.
#[derive(Debug, Clone, Copy)]
pub(super) struct ProfileHooks {
    pub(super) enter: u32,
    pub(super) ret: u32,
    pub(super) tail: u32,
}
