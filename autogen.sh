#!/bin/sh
# autogen.sh - generate configure and Makefile.in from a git checkout.
# In a git checkout with no commit-msg hook, it installs one that runs
# the checked-out tree's build-aux/commit-msg (HACKING.md, "Commits"); a
# hook already there is left alone, and a tree that is not a git checkout
# (a tarball, a git archive) gets none.
set -e
cd "$(dirname "$0")"

# The installed hook is a stub that runs the tree's own script, so that it
# follows the branch checked out (and does nothing in a worktree whose
# tree has no such script yet): worktrees share one hooks folder.
if [ -f build-aux/commit-msg ] &&
   hooks=$(git rev-parse --path-format=absolute --git-path hooks 2>/dev/null ||
	   git rev-parse --git-path hooks 2>/dev/null) &&
   [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ] &&
   [ ! -e "$hooks/commit-msg" ] && [ ! -L "$hooks/commit-msg" ]; then
	mkdir -p "$hooks" &&
	cat >"$hooks/commit-msg.tmp" <<-'HOOK' &&
	#!/bin/sh
	# Installed by qgraph's autogen.sh: runs the checked-out tree's
	# build-aux/commit-msg, where there is one.
	hook="$(git rev-parse --show-toplevel)/build-aux/commit-msg"
	[ -f "$hook" ] || exit 0
	exec sh "$hook" "$@"
	HOOK
	chmod +x "$hooks/commit-msg.tmp" &&
	mv "$hooks/commit-msg.tmp" "$hooks/commit-msg" &&
	echo "autogen.sh: installed $hooks/commit-msg" >&2 ||
	echo "autogen.sh: could not install $hooks/commit-msg" >&2
fi

autoreconf --install --force --warnings=all "$@"
