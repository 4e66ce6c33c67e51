#!/usr/bin/env bash
# Regenerates the committed protobuf code and grpc-java stub (src/main/generated) from
# ../../proto/claimd/v1/claims.proto with protoc and protoc-gen-grpc-java, which Maven fetches
# (profile `generate` in pom.xml).
#   ./gen.sh           regenerate src/main/generated
#   ./gen.sh --check   generate into target/gen-check and compare; exits 1 naming stale files
set -euo pipefail
cd "$(dirname "$0")"
committed=src/main/generated
case "${1:-}" in
  --check)
    out=target/gen-check
    rm -rf "$out"
    mvn -q -B -Dstyle.color=never -Pgenerate -Dgen.out="$PWD/$out" generate-sources
    stale=0
    while IFS= read -r f; do
      echo "stale: $f" >&2
      stale=1
    done < <(diff -rq "$committed" "$out" 2>&1 | sed -E \
      -e "s#^Files $committed/(.*) and $out/.* differ\$#$committed/\1#" \
      -e "s#^Only in $committed(/?)(.*): (.*)\$#$committed/\2\1\3 (no longer generated)#" \
      -e "s#^Only in $out(/?)(.*): (.*)\$#$committed/\2\1\3 (missing)#" | sed -E 's#//#/#g' | sort)
    if [ "$stale" -ne 0 ]; then
      echo "generated code is stale: run clients/java/gen.sh" >&2
      exit 1
    fi
    echo "generated code is up to date"
    ;;
  "")
    rm -rf "$committed"
    mvn -q -B -Dstyle.color=never -Pgenerate -Dgen.out="$PWD/$committed" generate-sources
    echo "regenerated $committed"
    ;;
  *)
    echo "usage: $0 [--check]" >&2
    exit 2
    ;;
esac
