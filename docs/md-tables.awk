# Markdown → Markdown for go-md2man (docs/md2man.cmake runs it first): a
# table too wide for an 80-column terminal becomes a definition list, so the
# man page never overflows the line (tbl cannot break `IDENTIFIERS`). A row
#   | `key` | number | `TASKFERRY_KEY` | 4 | integer > 0 |
# under the header | Key | Type | Variable | Default | Rule | becomes
#   `key`
#   : Type: number; Variable: `TASKFERRY_KEY`; Default: 4; Rule: integer > 0
# (a two-column table: just the second cell). A table that fits, and anything
# inside a ``` fence, is copied as is. Cells are split on `|`; an escaped
# `\|` stays in its cell.
#   awk -v width=72 -f docs/md-tables.awk page.md

function trim(s) {
        sub(/^[ \t]+/, "", s)
        sub(/[ \t]+$/, "", s)
        return s
}

# split a table line into cells[1..n], return n
function cells_of(line, cells,    n, i, parts) {
        gsub(/\\\|/, "\001", line)
        line = trim(line)
        sub(/^\|/, "", line)
        sub(/\|$/, "", line)
        n = split(line, parts, "|")
        for (i = 1; i <= n; i++) {
                cells[i] = trim(parts[i])
                gsub("\001", "\\|", cells[i])
        }
        return n
}

# the width a cell takes when rendered: without the Markdown emphasis and
# code marks
function shown(s) {
        gsub(/`|\*\*|\\/, "", s)
        return length(s)
}

function flush(    r, c, total, n, def, sep) {
        if (nrows == 0) return
        total = 1
        for (c = 1; c <= ncols; c++) total += w[c] + 3
        if (total <= width) {
                for (r = 0; r < nrows; r++) print raw[r]
        } else {
                # rows[0] is the header, raw[1] the |---| line
                for (r = 2; r < nrows; r++) {
                        print cell[r, 1]
                        if (ncols == 2) {
                                def = cell[r, 2]
                        } else {
                                def = ""
                                sep = ""
                                for (c = 2; c <= ncols; c++) {
                                        if (cell[r, c] == "") continue
                                        def = def sep cell[0, c] ": " cell[r, c]
                                        sep = "; "
                                }
                        }
                        print ": " def
                        if (r < nrows - 1) print ""
                }
        }
        nrows = 0
        ncols = 0
        delete w
        delete cell
        delete raw
}

BEGIN {
        if (width == "") width = 72
        nrows = 0
        fence = 0
}

/^```/ {
        flush()
        fence = !fence
        print
        next
}

!fence && /^[ \t]*\|/ {
        n = cells_of($0, row)
        if (nrows == 0 || n > ncols) ncols = n
        for (c = 1; c <= n; c++) {
                cell[nrows, c] = row[c]
                if (nrows != 1 && shown(row[c]) > w[c]) w[c] = shown(row[c])
        }
        raw[nrows++] = $0
        next
}

{
        flush()
        print
}

END { flush() }
