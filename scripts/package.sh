#!/usr/bin/env bash
# Packages what is published, as crates.io and npm would get it, and checks each package carries
# what a user of it needs. Run by scripts/test.sh.
#   - the four crates, in their dependency order, in one `cargo package` (cargo resolves each
#     one's path dependencies from the packages it just made, and builds each from its packaged
#     sources); `cargo publish --dry-run` for the types crate, the one whose dependencies are all
#     on crates.io already (the others depend on it, unpublished);
#   - every .crate and the npm tarball hold the LICENSE and the README, and every crate's manifest
#     has the fields docs.rs and crates.io show (license, description, documentation,
#     [package.metadata.docs.rs]);
#   - the client's documentation with the features docs.rs builds, warning-free (the canister
#     library's wasm32-wasip1 page is built by the test command's doc step).
set -euo pipefail
cd "$(dirname "$0")/.."

read -ra crates <<<"ic-rusqlite-batch-types ic-rusqlite-batch-core ic-rusqlite-batch ic-batch-client"
out=target/package-verify

# Cargo treats a package version as immutable: it reuses its unpacked copy and the build of it
# from an earlier run. Both are dropped, so that this run verifies this run's sources.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/{ic-rusqlite-batch,ic-batch-client}* "$out"
args=()
for c in "${crates[@]}"; do args+=(-p "$c"); done
cargo package --locked --target-dir "$out" "${args[@]}"
cargo publish --dry-run --locked --target-dir "$out" -p ic-rusqlite-batch-types

metadata=$(cargo metadata --no-deps --format-version 1)
version=$(python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="ic-rusqlite-batch"))' <<<"$metadata")
status=0
for c in "${crates[@]}"; do
  crate="$out/package/$c-$version.crate"
  files=$(tar -tzf "$crate")
  for f in LICENSE README.md; do
    grep -qx "$c-$version/$f" <<<"$files" || { echo "$crate: no $f" >&2; status=1; }
  done
done
python3 scripts/package_check.py manifests "${crates[@]}" <<<"$metadata" || status=1

RUSTDOCFLAGS="-D warnings" cargo doc --release --no-deps -p ic-batch-client --features ic-agent,pocket-ic,ic-cdk

# The npm package: its LICENSE is a copy (npm does not pack a symbolic link), held to the root's.
cmp LICENSE src/batch_client_ts/LICENSE || { echo "src/batch_client_ts/LICENSE differs from LICENSE" >&2; status=1; }
(cd src/batch_client_ts && npm pack --dry-run --json 2>/dev/null) | python3 scripts/package_check.py npm || status=1
exit $status
