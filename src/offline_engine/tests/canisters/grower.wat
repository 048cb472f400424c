;; A canister that grows its heap (`grow`, and the query `grow_q`) and its stable memory
;; (`stable_grow`) by the pages its argument names (i32 LE), and replies with what memory.grow
;; or ic0.stable64_grow answered (i32 or i64 LE): the test canister of the memory limits.
(module
  (import "ic0" "msg_arg_data_copy" (func $arg_copy (param i32 i32 i32)))
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (import "ic0" "stable64_grow" (func $stable_grow (param i64) (result i64)))
  (memory 1)
  ;; grow(pages: i32): memory.grow's answer (i32 LE).
  (func $grow
    (call $arg_copy (i32.const 0) (i32.const 0) (i32.const 4))
    (i32.store (i32.const 8) (memory.grow (i32.load (i32.const 0))))
    (call $append (i32.const 8) (i32.const 4))
    (call $reply))
  (func (export "canister_update grow") (call $grow))
  (func (export "canister_query grow_q") (call $grow))
  ;; stable_grow(pages: i32): stable64_grow's answer (i64 LE).
  (func (export "canister_update stable_grow")
    (call $arg_copy (i32.const 0) (i32.const 0) (i32.const 4))
    (i64.store (i32.const 8) (call $stable_grow (i64.extend_i32_u (i32.load (i32.const 0)))))
    (call $append (i32.const 8) (i32.const 8))
    (call $reply)))
