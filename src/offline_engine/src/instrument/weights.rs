//! The replica's per-operator instruction weights (`METERING.md` §2).
//!
//! Every operator not listed costs 1, as in the replica. Loads and stores (scalar and SIMD)
//! cost 1 in wasm32 and 2 in wasm64. The static part of the bulk memory and table operations
//! is 100; their size operand is charged at run time by the injected helper.

use wasmparser::Operator;

/// Instruction weight of one operator. `wasm64` is true when the module's main memory is 64-bit.
pub fn operator_weight(op: &Operator<'_>, wasm64: bool) -> u64 {
    use Operator as O;
    let memory_access = if wasm64 { 2 } else { 1 };
    match op {
        // Structure markers carry no cost of their own.
        O::Block { .. } | O::Loop { .. } | O::Else | O::End => 0,

        // Scalar loads and stores.
        O::I32Load { .. }
        | O::I64Load { .. }
        | O::F32Load { .. }
        | O::F64Load { .. }
        | O::I32Load8S { .. }
        | O::I32Load8U { .. }
        | O::I32Load16S { .. }
        | O::I32Load16U { .. }
        | O::I64Load8S { .. }
        | O::I64Load8U { .. }
        | O::I64Load16S { .. }
        | O::I64Load16U { .. }
        | O::I64Load32S { .. }
        | O::I64Load32U { .. }
        | O::I32Store { .. }
        | O::I64Store { .. }
        | O::F32Store { .. }
        | O::F64Store { .. }
        | O::I32Store8 { .. }
        | O::I32Store16 { .. }
        | O::I64Store8 { .. }
        | O::I64Store16 { .. }
        | O::I64Store32 { .. } => memory_access,

        // SIMD loads and stores.
        O::V128Load { .. }
        | O::V128Load8x8S { .. }
        | O::V128Load8x8U { .. }
        | O::V128Load16x4S { .. }
        | O::V128Load16x4U { .. }
        | O::V128Load32x2S { .. }
        | O::V128Load32x2U { .. }
        | O::V128Load8Splat { .. }
        | O::V128Load16Splat { .. }
        | O::V128Load32Splat { .. }
        | O::V128Load64Splat { .. }
        | O::V128Load32Zero { .. }
        | O::V128Load64Zero { .. }
        | O::V128Store { .. }
        | O::V128Load8Lane { .. }
        | O::V128Load16Lane { .. }
        | O::V128Load32Lane { .. }
        | O::V128Load64Lane { .. }
        | O::V128Store8Lane { .. }
        | O::V128Store16Lane { .. }
        | O::V128Store32Lane { .. }
        | O::V128Store64Lane { .. } => memory_access,

        // Weight 2.
        O::GlobalGet { .. }
        | O::GlobalSet { .. }
        | O::If { .. }
        | O::Br { .. }
        | O::BrIf { .. }
        | O::BrTable { .. }
        | O::F32Add
        | O::F32Sub
        | O::F32Mul
        | O::F32Ceil
        | O::F32Floor
        | O::F32Trunc
        | O::F32Nearest
        | O::F64Add
        | O::F64Sub
        | O::F64Mul
        | O::F64Ceil
        | O::F64Floor
        | O::F64Trunc
        | O::F64Nearest
        | O::F32Copysign => 2,

        // Weight 3.
        O::F32Div
        | O::F64Copysign
        | O::F32Eq
        | O::F32Ne
        | O::F32Lt
        | O::F32Gt
        | O::F32Le
        | O::F32Ge
        | O::F64Eq
        | O::F64Ne
        | O::F64Lt
        | O::F64Gt
        | O::F64Le
        | O::F64Ge
        | O::F32ConvertI32S
        | O::F32ConvertI64S
        | O::F64ConvertI32S
        | O::F64ConvertI64S
        | O::ReturnCall { .. } => 3,

        // Weight 5.
        O::Call { .. }
        | O::F64Div
        | O::F32Sqrt
        | O::TableGet { .. }
        | O::TableSet { .. }
        | O::RefIsNull => 5,

        O::F64Sqrt => 8,

        // Weight 10.
        O::I32DivS
        | O::I32DivU
        | O::I32RemS
        | O::I32RemU
        | O::I64DivS
        | O::I64DivU
        | O::I64RemS
        | O::I64RemU
        | O::CallIndirect { .. } => 10,

        // Unsigned integer to float conversions.
        O::F32ConvertI32U | O::F32ConvertI64U | O::F64ConvertI32U | O::F64ConvertI64U => 16,

        O::F32Min | O::F32Max | O::F64Min | O::F64Max => 18,

        // Float to integer truncations (trapping and saturating) and memory.size.
        O::I32TruncF32S
        | O::I32TruncF32U
        | O::I32TruncF64S
        | O::I32TruncF64U
        | O::I64TruncF32S
        | O::I64TruncF32U
        | O::I64TruncF64S
        | O::I64TruncF64U
        | O::I32TruncSatF32S
        | O::I32TruncSatF32U
        | O::I32TruncSatF64S
        | O::I32TruncSatF64U
        | O::I64TruncSatF32S
        | O::I64TruncSatF32U
        | O::I64TruncSatF64S
        | O::I64TruncSatF64U
        | O::MemorySize { .. } => 20,

        O::ReturnCallIndirect { .. } => 60,

        // Static part of the bulk operations (the size operand is charged at run time).
        O::TableSize { .. }
        | O::MemoryFill { .. }
        | O::MemoryCopy { .. }
        | O::MemoryInit { .. }
        | O::TableFill { .. }
        | O::TableCopy { .. }
        | O::TableInit { .. } => 100,

        O::RefFunc { .. } => 130,

        O::MemoryGrow { .. } | O::TableGrow { .. } | O::DataDrop { .. } | O::ElemDrop { .. } => 300,

        // SIMD arithmetic that is not weight 1.
        O::I8x16LtU
        | O::I8x16GtU
        | O::I16x8LtU
        | O::I16x8GtU
        | O::I32x4LtU
        | O::I32x4GtU
        | O::I16x8Shl
        | O::I16x8ShrS
        | O::I16x8ShrU
        | O::I32x4Shl
        | O::I32x4ShrS
        | O::I32x4ShrU
        | O::I64x2Shl
        | O::I64x2ShrU
        | O::I8x16ShrU
        | O::I32x4Mul
        | O::I16x8ExtAddPairwiseI8x16U
        | O::I16x8ExtMulHighI8x16S
        | O::I16x8ExtMulHighI8x16U
        | O::I32x4ExtMulLowI16x8S
        | O::I32x4ExtMulHighI16x8S
        | O::I32x4ExtMulLowI16x8U
        | O::I32x4ExtMulHighI16x8U
        | O::F32x4Ceil
        | O::F32x4Floor
        | O::F32x4Trunc
        | O::F32x4Nearest
        | O::F32x4Abs
        | O::F32x4Neg
        | O::F32x4Add
        | O::F32x4Sub
        | O::F32x4Mul
        | O::F64x2Ceil
        | O::F64x2Floor
        | O::F64x2Trunc
        | O::F64x2Nearest
        | O::F64x2Abs
        | O::F64x2Neg
        | O::F64x2Add
        | O::F64x2Sub
        | O::F64x2Mul
        | O::I32x4TruncSatF32x4S
        | O::I32x4TruncSatF64x2SZero => 2,
        O::I8x16Shuffle { .. }
        | O::I8x16Popcnt
        | O::I8x16Shl
        | O::I8x16ShrS
        | O::I64x2ShrS
        | O::I32x4ExtAddPairwiseI16x8U
        | O::I32x4TruncSatF64x2UZero => 3,
        O::I64x2Mul
        | O::F32x4Min
        | O::F32x4Max
        | O::F64x2Min
        | O::I32x4TruncSatF32x4U
        | O::F32x4ConvertI32x4U => 4,
        O::F32x4Sqrt | O::F64x2Max => 5,
        O::F32x4Div => 10,
        O::F64x2Div => 12,
        O::F64x2Sqrt => 14,

        // Everything else (constants, integer arithmetic and comparisons, locals, select,
        // return, drop, unreachable, nop, conversions not listed above, ref.null, the rest of
        // SIMD, atomics) costs 1.
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmparser::{BlockType, MemArg};

    fn memarg() -> MemArg {
        MemArg {
            align: 0,
            max_align: 0,
            offset: 0,
            memory: 0,
        }
    }

    #[test]
    fn weights_match_the_table() {
        let cases: Vec<(Operator<'static>, u64)> = vec![
            (
                Operator::Block {
                    blockty: BlockType::Empty,
                },
                0,
            ),
            (
                Operator::Loop {
                    blockty: BlockType::Empty,
                },
                0,
            ),
            (Operator::I32Const { value: 0 }, 1),
            (Operator::I64Add, 1),
            (Operator::I32DivU, 10),
            (Operator::I64RemS, 10),
            (Operator::Call { function_index: 0 }, 5),
            (
                Operator::CallIndirect {
                    type_index: 0,
                    table_index: 0,
                },
                10,
            ),
            (Operator::BrIf { relative_depth: 0 }, 2),
            (
                Operator::If {
                    blockty: BlockType::Empty,
                },
                2,
            ),
            (Operator::GlobalGet { global_index: 0 }, 2),
            (Operator::MemoryGrow { mem: 0 }, 300),
            (Operator::MemorySize { mem: 0 }, 20),
            (Operator::MemoryFill { mem: 0 }, 100),
            (
                Operator::MemoryCopy {
                    dst_mem: 0,
                    src_mem: 0,
                },
                100,
            ),
            (Operator::I32Load { memarg: memarg() }, 1),
            (Operator::F64Sqrt, 8),
            (Operator::F32ConvertI64U, 16),
            (Operator::F64Min, 18),
            (Operator::I64TruncSatF64U, 20),
            (
                Operator::ReturnCallIndirect {
                    type_index: 0,
                    table_index: 0,
                },
                60,
            ),
            (Operator::RefFunc { function_index: 0 }, 130),
            (Operator::DataDrop { data_index: 0 }, 300),
            (Operator::F64x2Sqrt, 14),
            (Operator::I8x16Swizzle, 1),
            (Operator::Nop, 1),
        ];
        for (op, want) in cases {
            assert_eq!(operator_weight(&op, false), want, "{op:?}");
        }
        assert_eq!(
            operator_weight(&Operator::I64Store { memarg: memarg() }, true),
            2
        );
        assert_eq!(
            operator_weight(&Operator::V128Load { memarg: memarg() }, true),
            2
        );
    }
}
