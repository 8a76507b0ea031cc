#!/bin/sh
# scripts/fnlen.sh - `make fnlen`: no function of the source folders is 80
# lines or longer (docs/architecture.md; STYLE item 1). A function is
# measured as ctags measures it, from the line of its name to its closing
# brace. clang-format (make fmt-check) puts a function's opening brace
# alone at column 0 and its closing one too, and no other brace there, so
# that is what this reads: no ctags needed.
#
# usage: sh scripts/fnlen.sh FOLDER...   (from the top of the tree)
#
# Fails (exit 1) with one line per function that is too long, file:line
# first; prints the count and the longest function otherwise.
max=${FNLEN_MAX:-79}
files=
for d in "$@"; do
    for f in "$d"/*.c; do [ -f "$f" ] && files="$files $f"; done
done
[ -n "$files" ] || { echo "fnlen: no .c files in: $*" >&2; exit 2; }
# shellcheck disable=SC2086
exec awk -v max="$max" '
FNR == 1 { start = 0; name = ""; head = 0 }
/^[A-Za-z_]/ { head = FNR; headline = $0 }      # a line at column 0: a signature starts
/^\{$/ {                                        # a function body opens
    start = head
    name = headline
    sub(/\(.*/, "", name)
    sub(/.*[ *]/, "", name)
    next
}
/^\}$/ && start {                               # and closes
    n = FNR - start + 1
    count++
    if (n > longest) { longest = n; lname = FILENAME ":" start " " name }
    if (n > max) {
        printf "%s:%d: %s is %d lines (a function has at most %d: split it)\n", FILENAME, start, name, n, max
        bad++
    }
    start = 0
}
END {
    if (bad) { printf "fnlen: %d function(s) of %d too long\n", bad, count; exit 1 }
    printf "fnlen: %d functions, none over %d lines; the longest: %s (%d)\n", count, max, lname, longest
}' $files
