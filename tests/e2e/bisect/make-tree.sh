#!/bin/sh
# Make a git kernel tree for the 'bisect --source' demo: Debian's
# linux-source-6.1 (commit 1), kgate's kernel/patches (one commit each,
# the "good" end, tagged kgate-fixed), then a candidate series (one
# commit each, with its author and subject; the "bad" end is HEAD).
#
#   tests/e2e/bisect/make-tree.sh tests/e2e/bisect/culprit-7 /tmp/demo-tree
#   tools/kgate.py bisect --source /tmp/demo-tree --good kgate-fixed --bad HEAD x86_64
set -eu
[ $# -eq 2 ] || { echo "usage: $0 SERIES-DIR OUT-DIR" >&2; exit 2; }
series=$(realpath "$1")
out=$2
top=$(dirname "$(dirname "$(dirname "$(dirname "$(realpath "$0")")")")")
[ ! -e "$out" ] || { echo "$0: $out exists" >&2; exit 2; }
src=$(/usr/bin/python3 "$top/tools/kgate.py" source)
tmp="$out.tmp$$"
trap 'rm -rf "$tmp"' EXIT
echo "copying $src" >&2
cp -a "$src" "$tmp"
rm -f "$tmp/.kgate-source"
cd "$tmp"
git init -q
git config user.name "kgate demo"
git config user.email "kgate-demo@example.org"
echo "committing the Debian tree" >&2
git add -A -f	# Debian's .gitignore ignores the top level
git commit -q -m "Debian linux-source-6.1"
apply() {	# apply the patches a series file names, one commit each
	grep -v '^[[:space:]]*\(#\|$\)' "$1/series" | while read -r p; do
		git am -q --keep-cr "$1/$p"
	done
}
apply "$top/kernel/patches"
git tag kgate-fixed
apply "$series"
cd - > /dev/null
trap - EXIT
mv "$tmp" "$out"
git -C "$out" log --oneline kgate-fixed..HEAD | cat
