#!/usr/bin/env bash
# Pack the Claude Desktop extension (an MCP bundle, .mcpb: a zip of
# manifest.json and the server) from a release build:
#
#   cargo build --release -p computer-mcp
#   RUSTFLAGS='-C target-feature=+crt-static' cargo build --profile daemon \
#     --target x86_64-unknown-linux-gnu -p computerd
#   mcpb/pack.sh [OUT_DIR]
#
# SERVER and COMPUTERD override the two binaries (the static computerd is
# what a Docker computer binds). It writes OUT_DIR/computer-mcp-<version>-
# linux-x86_64.mcpb (default OUT_DIR: target/mcpb) and beside it the
# server.json of that release, with the bundle's sha256, and prints both
# paths.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=${1:-$root/target/mcpb}
server=${SERVER:-$root/target/release/computer-mcp}
computerd=${COMPUTERD:-$root/target/x86_64-unknown-linux-gnu/daemon/computerd}

for f in "$server" "$computerd"; do
  [ -x "$f" ] || { echo "pack: $f is not built (see the top of $0)" >&2; exit 1; }
done
if ! file -L "$computerd" | grep -q 'statically linked\|static-pie'; then
  echo "pack: $computerd is not static: build it with RUSTFLAGS='-C target-feature=+crt-static' --target x86_64-unknown-linux-gnu" >&2
  exit 1
fi
version=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$here/manifest.json")
said=$("$server" --version)
case "$said" in
  *" $version") ;;
  *) echo "pack: $server says \"$said\", where the manifest is version $version" >&2; exit 1 ;;
esac

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/server" "$out"
cp "$here/manifest.json" "$stage/manifest.json"
cp "$server" "$stage/server/computer-mcp"
cp "$computerd" "$stage/server/computerd"
chmod 0755 "$stage/server/computer-mcp" "$stage/server/computerd"
bundle="$out/computer-mcp-$version-linux-x86_64.mcpb"
rm -f "$bundle"
# -D: no entries for directories; the reference mcpb CLI's unpack (2.1.2)
# opens every entry as a file and fails on one ("EISDIR ... server/").
(cd "$stage" && zip -q -r -X -D "$bundle" manifest.json server)
sha=$(sha256sum "$bundle" | cut -d' ' -f1)
python3 - "$root/server.json" "$out/server.json" "$sha" <<'PY'
import json, sys
src, dst, sha = sys.argv[1:]
doc = json.load(open(src))
for p in doc["packages"]:
    if p["registryType"] == "mcpb":
        p["fileSha256"] = sha
open(dst, "w").write(json.dumps(doc, indent=2) + "\n")
PY
echo "$bundle"
echo "$out/server.json"
