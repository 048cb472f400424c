//! The fee schedule the suite prices messages with: the engine's, `offline_engine::fees` (the one
//! copy of the IC's fees in the repository), re-exported here.

pub use offline_engine::fees::*;
