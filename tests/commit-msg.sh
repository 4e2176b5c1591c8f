#!/bin/sh
# commit-msg.sh - build-aux/commit-msg, git's commit-msg hook, takes a
# subject of 72 characters or fewer followed by a blank line, and refuses
# anything else with its reason; autogen.sh installs a hook that runs it
# in a git checkout without one, and in no other tree.
set -u
. "$(dirname "$0")/lib/tap.sh"

hook=$src/build-aux/commit-msg
tap_tmpdir commit-msg
[ -r "$hook" ] || skip_all "no build-aux/commit-msg"

# check WANT TEXT: the hook given TEXT (a printf format) accepts it (WANT
# ok) or refuses it with a reason (WANT refused).
check() {
	printf "$2" >"$T/msg"
	if sh "$hook" "$T/msg" >"$T/out" 2>&1; then got=ok; else got=refused; fi
	if [ "$got" = refused ] && ! grep -q '^commit-msg: ' "$T/out"; then
		got="refused without a reason"
	fi
	if [ "$got" = "$1" ]; then
		pass "$1: $(printf "$2" | head -n 1 | cut -c 1-40)"
	else
		not_ok "expected $1, got $got: $(printf "$2" | head -n 1 | cut -c 1-40)"
		show "$T/out" 10
	fi
}

s70=$(printf '%070d' 0 | tr 0 x)
s72="ipc: $(printf '%067d' 0 | tr 0 y)"
s73="ipc: $(printf '%068d' 0 | tr 0 z)"
check ok 'ring: one line\n'
check ok 'ring: a subject\n\nA body that says why, and a line much longer than the subject may be, which is fine here.\n'
check ok "$s72\n\nbody\n"
check refused "$s73\n\nbody\n"
check refused 'ring: a subject\nthat goes on\n'
check refused 'ring: a subject\nthat goes on\n\nand a body\n'
check ok '\n\nring: leading empty lines go first\n\nbody\n'
check ok '# a comment first\nring: a subject   \n# comments between\n\nbody\n'
check ok 'ring: trailing blanks on the second line\n   \nbody\n'
check ok "ring: a subject\n\n# ------------------------ >8 ------------------------\n$s73\n"
check ok "fixup! $s72\n"
check refused "fixup! $s73\n"
# 70 ASCII characters and two of two bytes each: 72 characters, 74 bytes
check ok "${s70}\303\251\303\251\n"
check refused "${s70}x\303\251\303\251\n"
check ok ''

# autogen.sh's part: a copy of it with an autoreconf that does nothing.
if ! command -v git >/dev/null 2>&1; then
	skip "no git: autogen.sh installs the hook"
	skip "no git: autogen.sh leaves a hook alone"
	skip "no git: autogen.sh installs nothing outside a checkout"
	skip "no git: the installed hook refuses a long subject"
	tap_done
	exit
fi
mkdir "$T/bin" "$T/repo" "$T/repo/build-aux" "$T/plain" "$T/plain/build-aux"
printf '#!/bin/sh\nexit 0\n' >"$T/bin/autoreconf"
chmod +x "$T/bin/autoreconf"
for d in repo plain; do
	cp "$src/autogen.sh" "$T/$d/" && cp "$hook" "$T/$d/build-aux/"
done
GIT_CEILING_DIRECTORIES=$T
GIT_CONFIG_NOSYSTEM=1
HOME=$T
GIT_AUTHOR_NAME=qgraph GIT_AUTHOR_EMAIL=qgraph@localhost
GIT_COMMITTER_NAME=qgraph GIT_COMMITTER_EMAIL=qgraph@localhost
export GIT_CEILING_DIRECTORIES GIT_CONFIG_NOSYSTEM HOME
export GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE 2>/dev/null

(cd "$T/repo" && git init -q . && PATH=$T/bin:$PATH sh ./autogen.sh) >"$T/out" 2>&1
installed=$T/repo/.git/hooks/commit-msg
[ -x "$installed" ] && pass "autogen.sh installs the hook in a checkout without one" ||
	{ not_ok "autogen.sh installs the hook in a checkout without one"; show "$T/out" 10; }

printf '#!/bin/sh\nexit 0\n' >"$installed"
cp "$installed" "$T/mine"
(cd "$T/repo" && PATH=$T/bin:$PATH sh ./autogen.sh) >"$T/out" 2>&1
cmp -s "$installed" "$T/mine" && pass "autogen.sh leaves a hook that is there alone" ||
	not_ok "autogen.sh leaves a hook that is there alone"
rm -f "$installed"
(cd "$T/repo" && PATH=$T/bin:$PATH sh ./autogen.sh) >"$T/out" 2>&1

(cd "$T/plain" && PATH=$T/bin:$PATH sh ./autogen.sh) >"$T/out" 2>&1
st=$?
[ $st -eq 0 ] && [ ! -e "$T/plain/.git" ] && [ -z "$(cat "$T/out")" ] &&
	pass "autogen.sh installs nothing, quietly, outside a checkout" ||
	{ not_ok "autogen.sh installs nothing, quietly, outside a checkout (exit $st)"; show "$T/out" 10; }

(cd "$T/repo" && git add autogen.sh build-aux && git commit -q -m "$s73" && exit 1
 git commit -q -m "$s72" -m 'body') >"$T/out" 2>&1 &&
	grep -q 'at most 72' "$T/out" &&
	pass "the installed hook refuses a long subject and takes a short one" ||
	{ not_ok "the installed hook refuses a long subject and takes a short one"; show "$T/out" 10; }
tap_done
