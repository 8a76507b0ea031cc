#!/bin/sh
# scripts/levels.sh - `make levels`: every `#include "x/..."` of the source
# folders checked against the level table of docs/architecture.md, which is
# the one place the levels are written (the check parses the table, so the
# two cannot drift).
#
# usage: sh scripts/levels.sh DOC FOLDER...   (from the top of the tree)
#
# The table is the rows `| LEVEL | `a/`, `b/` | what | may import |` under
# the heading "## Folders and levels". A folder may include its own headers
# and those of the folders its "may import" cell allows: "... below" (with
# or without a folder named before it) allows every lower level; otherwise
# the folders named in backquotes (text in parentheses is a comment);
# "nothing" allows none. A folder named there must sit at a lower level.
# Fails (exit 1, one line per problem, file:line first) on an upward or
# sideways include, an include the row does not allow, an include of a
# folder the table does not know, and a source folder without a row or a
# row without a source folder.
doc=$1
shift
[ -f "$doc" ] || { echo "levels: $doc: no such file" >&2; exit 2; }
files=
for d in "$@"; do
    for f in "$d"/*.c "$d"/*.h; do [ -f "$f" ] && files="$files $f"; done
done
# shellcheck disable=SC2086
exec awk -v dirs="$*" -v doc="$doc" '
function names(cell, out,    n) {    # the `x/` of a cell into out[1..n]
    n = 0
    while (match(cell, /`[a-z0-9_]+\/`/)) {
        out[++n] = substr(cell, RSTART + 1, RLENGTH - 3)
        cell = substr(cell, RSTART + RLENGTH)
    }
    return n
}
function bad(msg) { print "levels: " msg; errors++ }
FNR == NR {
    if ($0 ~ /^## /) intable = ($0 ~ /^## Folders and levels/)
    if (!intable || $0 !~ /^\| *[0-9]+ *\|/) next
    nf = split($0, col, "|")
    lvl = col[2] + 0
    nfold = names(col[3], fold)
    may = col[5]
    gsub(/\([^)]*\)/, "", may)
    nmay = names(may, allow)
    for (i = 1; i <= nfold; i++) {
        f = fold[i]
        if (f in level) bad(doc ": " f "/ has two rows")
        level[f] = lvl
        below[f] = (may ~ /below/)
        for (k = 1; k <= nmay; k++) allowed[f, allow[k]] = 1
        mayline[f] = FNR
        nmaylist[f] = nmay
        for (k = 1; k <= nmay; k++) maylist[f, k] = allow[k]
    }
    next
}
FNR == 1 && !checked {
    checked = 1
    for (f in level)
        for (k = 1; k <= nmaylist[f]; k++) {
            t = maylist[f, k]
            if (!(t in level))
                bad(doc ":" mayline[f] ": " f "/ may import " t "/, which has no row")
            else if (level[t] >= level[f])
                bad(doc ":" mayline[f] ": " f "/ (level " level[f] ") may import " t \
                    "/ (level " level[t] "): not below it")
        }
    n = split(dirs, d, " ")
    for (i = 1; i <= n; i++) {
        src[d[i]] = 1
        if (!(d[i] in level)) bad(doc ": source folder " d[i] "/ has no row in the level table")
    }
    for (f in level)
        if (!(f in src)) bad(doc ": " f "/ has a row but is no source folder")
}
/^[ \t]*#[ \t]*include[ \t]*"[a-z0-9_]+\// {
    from = FILENAME
    sub(/\/.*/, "", from)
    to = $0
    sub(/^[^"]*"/, "", to)
    sub(/\/.*/, "", to)
    if (to == from) next
    where = FILENAME ":" FNR ": " from "/ includes " to "/"
    if (!(to in level)) bad(where ": " to "/ is not in the level table")
    else if (!(from in level)) next    # reported above
    else if (level[to] > level[from])
        bad(where " (level " level[to] " above " level[from] "): upward")
    else if (level[to] == level[from])
        bad(where " (both level " level[to] "): sideways")
    else if (!below[from] && !((from, to) in allowed))
        bad(where ": the table lets " from "/ import " (nmaylist[from] ? "only what its row names" : "nothing"))
}
END {
    if (!checked && dirs != "") bad("no source files in " dirs)
    if (errors) { print "levels: " errors " problem(s); the table is in " doc; exit 1 }
    print "levels: every include of " dirs " follows " doc
}
' "$doc" $files
