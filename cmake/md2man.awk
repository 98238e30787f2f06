# md2man.awk - turns a man page written in Markdown (docs/sg-stream.md) into
# roff for man(7), so the installed page is the document and cannot drift
# from it.  It knows the small part of Markdown those pages use, and nothing
# more:
#
#   # name(N)              the title (.TH)
#   ## SECTION, ### Sub    .SH, .SS
#   paragraphs             .PP, filled
#   4-space indented code  .nf, unfilled, indented
#   | tag | text | col |    one .TP per row: the first cell is the tag, the
#                          second the text, each further non-empty cell a
#                          line "Header: value" (so "default" reads
#                          "Default: 60s"); \| is a literal bar
#   `code`, [text](link)   bold, the text alone
#
# Usage: awk -v version=0.1.0 -v out=FILE -f md2man.awk PAGE.md
# mawk and gawk both run it (POSIX awk, no extensions).

function emit(s) {
    print s > out
}

# Roff escapes for text that is not a request: backslashes, hyphens (so an
# option typed from the page is a real "-"), the three non-ASCII marks the
# pages use, and a leading control character.
function esc(s) {
    gsub(/\\/, "\\e", s)
    gsub(/-/, "\\-", s)
    gsub(/→/, "\\(->", s)
    gsub(/—/, "\\(em", s)
    gsub(/–/, "\\(en", s)
    if (s ~ /^[.']/) {
        s = "\\&" s
    }
    return s
}

# Inline Markdown: links keep their text, code spans turn bold.
function inline(s, r, link) {
    r = ""
    while (match(s, /\[[^]]*\]\([^)]*\)/)) {
        link = substr(s, RSTART, RLENGTH)
        sub(/\]\(.*$/, "", link)
        r = r substr(s, 1, RSTART - 1) substr(link, 2)
        s = substr(s, RSTART + RLENGTH)
    }
    s = esc(r s)
    r = ""
    while (match(s, /`[^`]*`/)) {
        r = r substr(s, 1, RSTART - 1) "\\fB" substr(s, RSTART + 1, RLENGTH - 2) "\\fR"
        s = substr(s, RSTART + RLENGTH)
    }
    return r s
}

function trim(s) {
    sub(/^[ \t]+/, "", s)
    sub(/[ \t]+$/, "", s)
    return s
}

# Splits a table row into cells[1..n]; returns n.
function row(line, cells, n, i, parts) {
    gsub(/\\\|/, "\001", line)
    sub(/^[ \t]*\|/, "", line)
    sub(/\|[ \t]*$/, "", line)
    n = split(line, parts, "|")
    for (i = 1; i <= n; i++) {
        cells[i] = trim(parts[i])
        gsub(/\001/, "|", cells[i])
    }
    return n
}

function end_block() {
    if (code) {
        emit(".fi")
        emit(".RE")
        code = 0
    }
    blanks = 0
    para = 0
    table = 0
}

BEGIN {
    if (out == "") {
        out = "/dev/stdout"
    }
    para = 0       # inside a filled paragraph
    code = 0       # inside an indented code block
    blanks = 0     # blank lines held back inside a code block
    table = 0      # rows seen of the current table (the first is its header)
    fresh = 0      # just after a heading: no .PP needed
    section = ""
}

# The title: "# sg-stream(1)".
NR == 1 && /^# / {
    name = $2
    sect = name
    sub(/\(.*/, "", name)
    sub(/^[^(]*\(/, "", sect)
    sub(/\).*/, "", sect)
    source = FILENAME
    sub(/.*\//, "", source)
    emit(".\\\" Generated from " source " by md2man.awk; edit the Markdown.")
    emit(".TH " toupper(name) " " sect " \"\" \"streamguard " version "\" \"User Commands\"")
    # Option names must not be hyphenated, nor spread by justification.
    emit(".nh")
    emit(".ad l")
    next
}

/^## / {
    end_block()
    section = substr($0, 4)
    emit(".SH " section)
    fresh = 1
    next
}

/^### / {
    end_block()
    emit(".SS " substr($0, 5))
    fresh = 1
    next
}

/^[ \t]*$/ {
    if (code) {
        blanks++
    } else {
        end_block()
    }
    next
}

/^    / && (code || !para) {
    if (!code) {
        end_block()
        if (!fresh) {
            emit(".PP")
        }
        emit(".RS 4")
        emit(".nf")
        code = 1
    }
    for (; blanks > 0; blanks--) {
        emit("")
    }
    emit(esc(substr($0, 5)))
    fresh = 0
    next
}

/^[ \t]*\|/ {
    if (code) {
        end_block()
    }
    n = row($0, cells)
    if (cells[1] ~ /^:?-+:?$/) {
        next
    }
    if (table++ == 0) {
        for (i = 1; i <= n; i++) {
            header[i] = cells[i]
        }
        next
    }
    emit(".TP")
    emit(inline(cells[1]))
    emit(inline(cells[2]))
    for (i = 3; i <= n; i++) {
        if (cells[i] != "") {
            emit(".br")
            emit(inline(toupper(substr(header[i], 1, 1)) substr(header[i], 2) ": " cells[i]))
        }
    }
    fresh = 0
    next
}

{
    if (code) {
        end_block()
    }
    if (!para && !fresh) {
        emit(".PP")
    }
    para = 1
    fresh = 0
    line = $0
    if (section == "NAME") {
        # whatis(1) wants "name \- what it does"
        sub(/ — /, " - ", line)
    }
    emit(inline(line))
}

END {
    end_block()
}
