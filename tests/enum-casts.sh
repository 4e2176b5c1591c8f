#!/bin/sh
# enum-casts.sh - element types and ops are numbered three ways: the
# engine's (enum qg_type, enum qg_op), the public API's (enum qgraph_type,
# enum qgraph_op) and the wire's (Qgraph__Type, Qgraph__Op).  The numbers
# differ, and one table in src/wire converts between them (qg_wire_type,
# qg_wire_public_type, ...).  Outside src/wire no cast may turn a value of
# one numbering into another: this finds every cast to one of the six types
# and fails on each whose operand is of another numbering.
#
# An operand's numbering is known from the names it is made of: constants
# (QG_TYPE_F32, QGRAPH_OP_ADD, QGRAPH__TYPE__TYPE_I32), functions declared
# to return one of the types (qg_best_weight_type), and variables, fields
# and parameters declared with one, in the same file when it declares the
# name, else in the project's headers and (for the wire's fields)
# proto/qgraph.proto.  A name declared with more than one numbering, or
# also as a plain integer, tells nothing; nor do literals.  A call of one of
# src/wire's table functions (qg_wire_*) is the conversion itself.
#
# With arguments, checks those files instead of the tree (to show it fails).
set -u
top=${QG_TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top" || exit 99
if [ $# -gt 0 ]; then
	files=$*
else
	files=$(find src client daemon tests proto -name '*.[ch]' ! -path 'src/wire/*' ! -name '*.pb-c.*' | sort)
fi
headers=$(find src client daemon tests -name '*.h' | sort)

awk -v nfiles="$(echo "$files" | wc -w)" '
function fam_of_type(s) {
	if (s ~ /^enum[ \t]+qg_(type|op)$/) return "engine"
	if (s ~ /^enum[ \t]+qgraph_(type|op)$/) return "public"
	if (s ~ /^Qgraph__(Type|Op)$/) return "wire"
	return ""
}
# note that NAME is declared with numbering F ("" for a plain integer) in scope SC
function declare(sc, name, f,   k) {
	k = sc SUBSEP name
	if (!(k in decl)) decl[k] = f
	else if (decl[k] != f) decl[k] = "?"
}
# the declarations of one line, in scope SC
function scan_decls(sc, line,   m, name, f) {
	while (match(line, /(enum[ \t]+qg_type|enum[ \t]+qg_op|enum[ \t]+qgraph_type|enum[ \t]+qgraph_op|Qgraph__Type|Qgraph__Op)[ \t*]+(const[ \t]+)?[A-Za-z_][A-Za-z0-9_]*[ \t]*[;,=)\[(]/)) {
		m = substr(line, RSTART, RLENGTH)
		f = m; sub(/[ \t*].*/, "", f)
		if (f == "enum") { f = m; sub(/^enum[ \t]+/, "", f); sub(/[ \t*].*/, "", f); f = "enum " f }
		name = m; sub(/^(enum[ \t]+)?[A-Za-z_]+[ \t*]+(const[ \t]+)?/, "", name)
		if (name ~ /\($/) { sub(/[ \t]*\($/, "", name); ret[name] = fam_of_type(f) }
		else { sub(/[ \t]*[;,=)\[]$/, "", name); declare(sc, name, fam_of_type(f)) }
		line = substr(line, RSTART + RLENGTH)
	}
	while (match(line, /(^|[^A-Za-z0-9_])(u?int(8|16|32|64)?(_t)?|unsigned|long|size_t|ssize_t|bool)[ \t*]+[A-Za-z_][A-Za-z0-9_]*[ \t]*[;,=)\[]/)) {
		m = substr(line, RSTART, RLENGTH)
		sub(/^[^A-Za-z_]/, "", m)
		name = m; sub(/^[A-Za-z0-9_]+[ \t*]+/, "", name); sub(/[ \t]*[;,=)\[]$/, "", name)
		declare(sc, name, "")
		line = substr(line, RSTART + RLENGTH)
	}
}
# the numbering of identifier ID in FILE ("" unknown), MEMBER if it follows -> or .
function fam_of_id(file, id, member) {
	if (id ~ /^QG_(TYPE|OP)_/) return "engine"
	if (id ~ /^QGRAPH__(TYPE|OP)__/) return "wire"
	if (id ~ /^QGRAPH_(TYPE|OP)_/) return "public"
	if (id in ret) return ret[id]
	if ((file SUBSEP id) in decl) return decl[file SUBSEP id] == "?" ? "" : decl[file SUBSEP id]
	if (("H" SUBSEP id) in decl) return decl["H" SUBSEP id] == "?" ? "" : decl["H" SUBSEP id]
	return ""
}
# the primary expression at the start of S (a cast binds tighter than any binary operator)
function operand(s,   i, c, depth, out) {
	sub(/^[ \t]+/, "", s)
	depth = 0
	for (i = 1; i <= length(s); i++) {
		c = substr(s, i, 1)
		if (c == "(" || c == "[") depth++
		else if (c == ")" || c == "]") { if (depth == 0) break; depth-- }
		else if (depth == 0 && c !~ /[A-Za-z0-9_.>-]/) break
		else if (depth == 0 && c == "-" && i > 1 && substr(s, i + 1, 1) != ">") break
		else if (depth == 0 && c == ">" && substr(s, i - 1, 1) != "-") break
	}
	return substr(s, 1, i - 1)
}
FNR == 1 { fileno++ }
# the headers (and the proto) first: declarations every file may see
fileno > nfiles && FILENAME ~ /\.proto$/ {
	if (match($0, /^[ \t]*(Type|Op)[ \t]+[a-z_]+[ \t]*=/)) {
		n = $0; sub(/^[ \t]*(Type|Op)[ \t]+/, "", n); sub(/[ \t]*=.*/, "", n)
		declare("H", n, "wire")
	}
	next
}
fileno > nfiles { scan_decls("H", $0); next }
{ scan_decls(FILENAME, $0); lines[FILENAME, FNR] = $0; nl[FILENAME] = FNR; order[fileno] = FILENAME }
END {
	bad = 0
	for (k = 1; k <= nfiles; k++) {
		file = order[k]
		for (ln = 1; ln <= nl[file]; ln++) {
			rest = lines[file, ln]
			if (rest ~ /^[ \t]*(\/\/|\*|\/\*)/) continue
			while (match(rest, /\((enum[ \t]+qg_type|enum[ \t]+qg_op|enum[ \t]+qgraph_type|enum[ \t]+qgraph_op|Qgraph__Type|Qgraph__Op)\)/)) {
				to = substr(rest, RSTART + 1, RLENGTH - 2)
				rest = substr(rest, RSTART + RLENGTH)
				op = operand(rest)
				if (op ~ /^qg_wire_[a-z_]*\(/) continue
				tf = fam_of_type(to)
				# the names the value is made of: a member chain counts by its last member
				e = op; from = ""
				gsub(/[A-Za-z_][A-Za-z0-9_]*[ \t]*(->|\.)/, "", e)
				while (match(e, /[A-Za-z_][A-Za-z0-9_]*/)) {
					id = substr(e, RSTART, RLENGTH)
					e = substr(e, RSTART + RLENGTH)
					f = fam_of_id(file, id)
					if (f != "" && f != tf) { from = f; break }
				}
				if (from != "") {
					printf "not ok %d - %s:%d: (%s)%s casts the %s numbering into the %s one\n", ++n, file, ln, to, op, from, tf
					printf "# use the table in src/wire (wire.h: qg_wire_type, qg_wire_public_type, ...)\n"
					bad++
				} else {
					casts++
				}
			}
		}
	}
	printf "ok %d - %d casts to a type or op enum outside src/wire, none across numberings\n", ++n, casts
	printf "1..%d\n", n
	exit bad > 0
}
' $files $headers proto/qgraph.proto
