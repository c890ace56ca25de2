#!/usr/bin/env bash
# The structure figures issue 28 reports, for the tree at $1 (default .):
# lines and functions over 80 lines in src/kv and tools/kvtrim (universal
# ctags: function definitions with their end lines), virtual methods on
# Policy, and the places a retention ratio becomes entries.
set -euo pipefail
root=${1:-.}
cd "$root"
for d in src/kv tools/kvtrim; do
  lines=$(find "$d" -name '*.cpp' -o -name '*.h' | xargs cat | wc -l)
  long=$(ctags --fields=+ne --output-format=json -R --languages=C++ --kinds-C++=f -f - "$d" 2>/dev/null |
    python3 -c '
import json, sys
n = 0
for l in sys.stdin:
    t = json.loads(l)
    if "end" in t and t["end"] - t["line"] + 1 > 80:
        n += 1
        print("  ", t["path"], t["name"], t["end"] - t["line"] + 1, file=sys.stderr)
print(n)')
  echo "$d: $lines lines, $long functions over 80 lines"
done
echo "Policy virtual methods: $(sed -n '/^class Policy {/,/^};/p' src/kv/policy.h | grep -c 'virtual')"
echo "places a ratio becomes entries (ceil(... ratio ... n)):"
grep -rn 'ceil(.*ratio' --include=*.cpp src | sed 's/^/  /'
