"""What scripts/package.sh checks in the manifests and in the npm tarball's listing.

  cargo metadata --no-deps --format-version 1 | python3 scripts/package_check.py manifests <crate>...
      every named crate has the fields crates.io and docs.rs show (license, description,
      documentation, readme) and [package.metadata.docs.rs] targets
  npm pack --dry-run --json | python3 scripts/package_check.py npm
      the tarball holds the LICENSE, the README, package.json and the compiled entry point
"""
import json
import sys


def manifests(published):
    status = 0
    for p in json.load(sys.stdin)["packages"]:
        name = p["name"]
        if name not in published:
            continue
        for field in ("license", "description", "documentation", "readme"):
            if not p.get(field):
                print(f"{name}: no {field}", file=sys.stderr)
                status = 1
        if not (p.get("metadata") or {}).get("docs", {}).get("rs", {}).get("targets"):
            print(f"{name}: no [package.metadata.docs.rs] targets", file=sys.stderr)
            status = 1
    return status


def npm():
    files = {f["path"] for f in json.load(sys.stdin)[0]["files"]}
    missing = {"LICENSE", "README.md", "package.json", "dist/src/index.js", "dist/src/index.d.ts"} - files
    if missing:
        print("npm package lacks " + ", ".join(sorted(missing)), file=sys.stderr)
        return 1
    print(f"npm package: {len(files)} files, LICENSE and README included")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["manifests"]:
        sys.exit(manifests(set(sys.argv[2:])))
    if sys.argv[1:] == ["npm"]:
        sys.exit(npm())
    sys.exit(__doc__)
