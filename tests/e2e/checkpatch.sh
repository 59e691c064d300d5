#!/bin/sh
# scripts/checkpatch.pl (from the extracted Debian tree) on the kernel
# patches and on the C test programs. Commit ids in the messages are
# upstream ones; the extracted tree has no git history to look them up.
set -eu
cd "$(dirname "$0")/../.."
src=$(/usr/bin/python3 tools/kgate.py source)
cp="$src/scripts/checkpatch.pl"
status=0
# The series' patches (kernel/series.yaml): fixed, control, mutants.
patches=$(/usr/bin/python3 tools/kgate.py series --patches)
[ -n "$patches" ]
for p in $patches; do
	# From stdin: given a path inside a git work tree, checkpatch.pl
	# mistakes the patch for a source file.
	"$cp" --strict --no-tree --ignore UNKNOWN_COMMIT_ID -q - < "$p" || status=1
	echo "checkpatch: $p"
done
for f in guest/*.c guest/*.h; do
	"$cp" --no-tree -f -q "$f" || status=1
	echo "checkpatch: $f"
done
exit $status
