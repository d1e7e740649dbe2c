#!/usr/bin/env bash
# check-scripts.sh - lint the repository's shell scripts for a pipeline that fails at random under
# `set -o pipefail`: a reader that stops early (`head`, `grep -q`, `grep -m N`, `grep -l`, `sed Nq`)
# closes the pipe while the writer may still be writing; the writer dies of SIGPIPE (status 141) and
# pipefail makes the whole pipeline fail although the reader found what it wanted
# (`ldd x | grep -q lib` failed 7 runs in 50 this way). Read the output whole first
# (`out=$(cmd); grep -q pat <<<"$out"`), let the reader read everything (`awk '... && n++ < 5'`), or
# have the first command stop by itself (`find ... -print -quit`).
# Checks every tracked file whose first line runs bash or sh (scripts/, .ci/, bench/, tests/, python/
# and the rest) and that turns pipefail on; pipelines continued over lines ("|" or "\" at a line's
# end) are joined first. A line ending in "# pipefail-ok: <why>" is left alone.
# Exit status: 0 clean, 1 a pipeline found (each printed as file:line: text), 2 not in a git checkout.
#   usage: scripts/check-scripts.sh
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files 2>/dev/null) || { echo "check-scripts: not a git checkout" >&2; exit 2; }

bad=0
checked=0
while IFS= read -r f; do
    [ -f "$f" ] || continue
    IFS= read -r first <"$f" || true
    case "$first" in '#!'*bash* | '#!'*/sh | '#!'*' sh') ;; *) continue ;; esac
    grep -qE 'set -[a-zA-Z]*o pipefail|set -o pipefail|pipefail' "$f" || continue
    checked=$((checked + 1))
    # join continued lines, drop comments, then look for an early-exiting reader after a "|"
    hits=$(awk -v file="$f" '
        function flush() {
            if (text == "") return
            if (text !~ /# pipefail-ok:/) {
                code = text
                sub(/(^|[ \t])#.*$/, "", code)
                if (code ~ /[^|]\|[ \t]*(head([ \t]|$)|grep[ \t]+(-[a-zA-Z]*[qlm]|--quiet|--max-count|--files-with)|sed[ \t]+(-n[ \t]+)?.?[0-9]*q)/)
                    printf "%s:%d: %s\n", file, start, text
            }
            text = ""
        }
        {
            if (text == "") start = NR
            line = $0
            cont = (line ~ /(\||\\|&&)[ \t]*$/)
            sub(/\\[ \t]*$/, "", line)
            text = text " " line
            if (!cont) flush()
        }
        END { flush() }' "$f")
    if [ -n "$hits" ]; then
        echo "$hits"
        bad=1
    fi
done <<<"$files"

if [ "$bad" -ne 0 ]; then
    echo "check-scripts: a reader that stops early after a pipe, under pipefail (see the head of $0)" >&2
    exit 1
fi
echo "check-scripts: $checked scripts with pipefail, no early-exiting reader after a pipe"
