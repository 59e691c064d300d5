#!/bin/sh
# A real LAVA lab on this machine, for the tests and to try the lab path:
# Debian's lava-server (PostgreSQL, gunicorn on 127.0.0.1, lava-scheduler)
# and N lava-workers (kgate-local-worker-1 ... -N), each with devices of
# its own: one of LAVA's stock 'qemu' type and one of kgate's own
# 'kgate-qemu' type (templates/lab/), plus kgate's artifact server. No
# systemd here: each daemon is started by hand and stopped by its PID.
#
#   tools/lab-local.sh up [N] start (or find running) and set up, with N
#                             workers (default 1); prints the lavacli
#                             identity, kept in build/lab/config
#                             (XDG_CONFIG_HOME), and the artifact base URL
#   tools/lab-local.sh down   stop what 'up' started, put back the files
#                             'up' changed on this host, and say what it
#                             cannot put back
#   tools/lab-local.sh env    the environment lines for lavacli/kgate.py
#   tools/lab-local.sh devconf N
#                             only write the device-type template and the
#                             device dictionaries of N workers (part of up)
#   tools/lab-local.sh write-config
#                             only write the lavacli identity, its token
#                             read from stdin (part of up)
#
# Ports: LAVA_PORT (default 8010), SERVE_PORT (default 8011). Each worker
# runs its jobs' QEMU on this machine: N workers mean N jobs at once.
# The lab's state (PID files, logs, tokens, backups of host files) is in
# KGATE_LAB_DIR (default build/lab); KGATE_LAB_DEVCONF is LAVA's
# dispatcher-config folder (default /etc/lava-server/dispatcher-config).
#
# Secrets (the lavacli token, the workers' tokens) are never on a command
# line, where any user can read them in /proc: they go from the command
# that prints them through a pipe into a file of mode 0600, and the
# daemons read them from there (lavacli's config, lava-worker
# --token-file). Each PID file records the process's start time, and
# 'down' signals only a process that is still the one 'up' started.
set -eu
cd "$(dirname "$0")/.."
top=$(pwd)
lab=${KGATE_LAB_DIR:-${KGATE_BUILD:-$top/build}/lab}
LAVA_PORT=${LAVA_PORT:-8010}
SERVE_PORT=${SERVE_PORT:-8011}
PY=/usr/bin/python3
IDENTITY=kgate-local
WORKER_PREFIX=kgate-local-worker-
DEVCONF=${KGATE_LAB_DEVCONF:-/etc/lava-server/dispatcher-config}
# What 'up' changed on the host: the original of each file it replaced
# (manifest: 'present PATH' or 'absent PATH'), and what it cannot undo.
backup=$lab/host-backup
SLOGS=/var/log/lava-server/kgate
STOP_WAIT=60 # quarter seconds between SIGTERM and SIGKILL

say() { echo "[lab] $*"; }
die() { echo "[lab] error: $*" >&2; exit 1; }

# The folders of the lab's state: private (tokens, PID files, backups).
state_dirs() {
	(umask 077 && mkdir -p "$lab" "$lab/logs" "$lab/config" "$backup")
	chmod 700 "$lab" "$lab/config" "$backup"
	if [ -f "$lab/config/lavacli.yaml" ]; then
		chmod 600 "$lab/config/lavacli.yaml"
	fi
}

# A secret from stdin into file $1, mode 0600 from its creation on; fails
# on an empty secret.
write_secret() {
	tmp=$(mktemp "$1.XXXXXX")
	if ! cat > "$tmp" || ! [ -s "$tmp" ]; then
		rm -f "$tmp"
		die "no secret to write into $1"
	fi
	mv -f "$tmp" "$1"
}

# The lavacli identity $IDENTITY in $lab/config/lavacli.yaml, mode 0600
# (other identities there are kept), with the token read from stdin.
write_config() {
	state_dirs
	$PY -c '
import os, sys, yaml
path, ident, uri, user = sys.argv[1:5]
token = sys.stdin.read().strip()
if not token or len(token.split()) != 1:
    sys.exit("[lab] error: write-config: no token on stdin")
conf = {}
if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
        conf = yaml.safe_load(f) or {}
    if not isinstance(conf, dict):
        sys.exit(f"[lab] error: {path} is not a lavacli configuration")
conf[ident] = {"uri": uri, "username": user, "token": token}
tmp = f"{path}.tmp{os.getpid()}"
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
with os.fdopen(fd, "w", encoding="utf-8") as f:
    f.write(yaml.safe_dump(conf, default_flow_style=False))
os.replace(tmp, path)
' "$lab/config/lavacli.yaml" "$IDENTITY" "http://127.0.0.1:$LAVA_PORT/RPC2" kgate
}

# --- processes -------------------------------------------------------

# "<boot id> <start time>" of live process $1 (field 22 of /proc/PID/stat,
# in clock ticks since boot): with the PID, which process it is. Fails if
# there is no such process or it is a zombie.
proc_ident() {
	case "$1" in
	'' | *[!0-9]*) return 1 ;;
	esac
	# Fields 3 (state) and 22 (start time), counted after the command
	# name, which may hold spaces and ')'.
	st=$(sed 's/^.*) //' "/proc/$1/stat" 2> /dev/null | awk 'NF >= 20 { print $1, $20 }')
	case "$st" in
	'' | Z\ * | X\ * | x\ *) return 1 ;;
	esac
	echo "$(cat /proc/sys/kernel/random/boot_id) ${st#* }"
}

cmdline() { tr '\0' ' ' < "/proc/$1/cmdline" 2> /dev/null | sed 's/ *$//' | cut -c1-100; }

# The PID file $lab/$1.pid: the PID, then its proc_ident when started.
pid_of() { sed -n 1p "$lab/$1.pid" 2> /dev/null; }
ident_of() { sed -n 2p "$lab/$1.pid" 2> /dev/null; }

# True if the process of PID file $1 is alive and still the one started.
running() {
	[ -f "$lab/$1.pid" ] || return 1
	want=$(ident_of "$1")
	[ -n "$want" ] && [ "$(proc_ident "$(pid_of "$1")" || true)" = "$want" ]
}

start() {
	name=$1
	shift
	if running "$name"; then
		return 0
	fi
	rm -f "$lab/$name.pid"
	"$@" > "$lab/logs/$name.out" 2>&1 &
	pid=$!
	ident=$(proc_ident "$pid") || die "$name exited at once (see $lab/logs/$name.out)"
	printf '%s\n%s\n%s\n' "$pid" "$ident" "$*" > "$lab/$name.pid.tmp"
	mv -f "$lab/$name.pid.tmp" "$lab/$name.pid"
}

# Stop the process of PID file $1: only if it is the one 'up' started
# (same PID and start time); SIGTERM, and SIGKILL only if it is still
# that process after $STOP_WAIT quarter seconds.
stop() {
	name=$1
	f=$lab/$name.pid
	[ -f "$f" ] || return 0
	pid=$(pid_of "$name")
	want=$(ident_of "$name")
	now=$(proc_ident "$pid" || true)
	if [ -z "$now" ]; then
		say "$name: not running (PID ${pid:-?} is gone); removed $f"
	elif [ -z "$want" ] || [ "$now" != "$want" ]; then
		say "$name: PID $pid is not the process 'up' started (it is now: $(cmdline "$pid")): not signalled; removed the stale $f"
	else
		kill -TERM "$pid" 2> /dev/null || true
		i=0
		while [ "$(proc_ident "$pid" || true)" = "$want" ] && [ $i -lt $STOP_WAIT ]; do
			i=$((i + 1))
			sleep 0.25
		done
		if [ "$(proc_ident "$pid" || true)" = "$want" ]; then
			kill -KILL "$pid" 2> /dev/null || true
			say "stopped $name ($pid) with SIGKILL: still running $((STOP_WAIT / 4)) s after SIGTERM"
		else
			say "stopped $name ($pid)"
		fi
	fi
	rm -f "$f"
}

# --- host files ----------------------------------------------------------

# The files under $DEVCONF that up writes, and so the only ones down
# puts back.
ours() {
	case "$1" in
	*/../* | */./*) return 1 ;;
	"$DEVCONF"/devices/kgate-local-*.jinja2 | "$DEVCONF"/device-types/kgate-qemu.jinja2) return 0 ;;
	esac
	return 1
}

# Before up first changes host file $1: say so and keep the original
# (or that there was none) for down. Only the first time: a second up
# must not save its own changes as the original.
save_host_file() {
	ours "$1" || die "internal: $1 is not a file up may change"
	(umask 077 && mkdir -p "$backup")
	if [ -f "$backup/manifest" ] && cut -d' ' -f2- "$backup/manifest" | grep -qxF -- "$1"; then
		return 0
	fi
	if [ -e "$1" ] || [ -L "$1" ]; then
		(umask 077 && mkdir -p "$backup/files$(dirname "$1")")
		cp -P -p "$1" "$backup/files$1"
		echo "present $1" >> "$backup/manifest"
		say "host: replacing $1 (original saved in $backup/files$1; down puts it back)"
	else
		echo "absent $1" >> "$backup/manifest"
		say "host: creating $1 (down removes it)"
	fi
}

# Write host file $1 (mode 0644) from stdin: never through a link an
# earlier file may have become.
write_host_file() {
	save_host_file "$1"
	tmp=$(mktemp "$1.XXXXXX")
	cat > "$tmp"
	chmod 644 "$tmp"
	mv -f "$tmp" "$1"
}

# A change of the host down cannot undo: recorded once, said by down.
kept() {
	(umask 077 && mkdir -p "$backup")
	if ! [ -f "$backup/kept" ] || ! grep -qxF -- "$*" "$backup/kept"; then
		echo "$*" >> "$backup/kept"
	fi
}

# Put back the host files up changed.
restore_host() {
	m=$backup/manifest
	[ -f "$m" ] || return 0
	: > "$m.left"
	while read -r what path; do
		if ! ours "$path"; then
			say "host: not touching $path: not a file up changes (see $m)"
			echo "$what $path" >> "$m.left"
			continue
		fi
		case "$what" in
		present)
			if [ -e "$backup/files$path" ] || [ -L "$backup/files$path" ]; then
				rm -f "$path"
				cp -P -p "$backup/files$path" "$path"
				rm -f "$backup/files$path"
				say "host: restored $path"
			else
				say "host: cannot restore $path: its saved original $backup/files$path is missing"
				echo "$what $path" >> "$m.left"
			fi
			;;
		absent)
			rm -f "$path"
			say "host: removed $path (up created it)"
			;;
		*)
			echo "$what $path" >> "$m.left"
			;;
		esac
	done < "$m"
	if [ -s "$m.left" ]; then
		mv -f "$m.left" "$m"
	else
		rm -f "$m" "$m.left"
		rm -rf "$backup/files"
	fi
}

# The device-type template and the dictionaries of workers 1..$1.
devconf() {
	workers=$1
	state_dirs
	for d in "$DEVCONF/device-types" "$DEVCONF/devices"; do
		[ -d "$d" ] || die "no $d (is lava-server installed? make deps)"
	done
	write_host_file "$DEVCONF/device-types/kgate-qemu.jinja2" < templates/lab/kgate-qemu.jinja2
	i=1
	while [ $i -le "$workers" ]; do
		printf "{%% extends 'qemu.jinja2' %%}\n{%% set no_kvm = True %%}\n" |
			write_host_file "$DEVCONF/devices/kgate-local-$i-qemu.jinja2"
		printf "{%% extends 'kgate-qemu.jinja2' %%}\n" |
			write_host_file "$DEVCONF/devices/kgate-local-$i-kgate-qemu.jinja2"
		i=$((i + 1))
	done
}

# --- the lab -------------------------------------------------------------

# Until $1 answers (with $3 = any: any HTTP status, e.g. kgate serve's
# 404 for a folder; otherwise a success).
wait_http() {
	f=-f
	[ "${3:-}" != any ] || f=
	i=0
	until curl -s $f -o /dev/null "$1"; do
		i=$((i + 1))
		[ $i -lt 120 ] || die "$2 did not answer at $1 (see $lab/logs/ and $SLOGS/)"
		sleep 0.5
	done
}

manage() { lava-server manage "$@"; }

# Worker $1 (a number): registered, its devices, its token (file 0600,
# read by lava-worker from there), started.
add_worker() {
	w=$WORKER_PREFIX$1
	manage workers list --all 2> /dev/null | grep -qw "$w" || manage workers add "$w" > /dev/null
	for dt in qemu kgate-qemu; do
		dev=kgate-local-$1-$dt
		manage devices list --all 2> /dev/null | grep -qw "$dev" ||
			manage devices add --device-type "$dt" --worker "$w" "$dev" > /dev/null
		# A device left Bad while its dictionary was missing (between a
		# down and this up) gets no job: it is ours, and whole again.
		if manage devices details "$dev" 2> /dev/null | grep -q "^health *: Bad"; then
			manage devices update --health GOOD "$dev" > /dev/null
			say "$dev: health Bad (its dictionary was missing), set Good"
		fi
	done
	mkdir -p "$lab/worker-$1"
	manage workers details "$w" | awk '$1 == "token" { print $3 }' | write_secret "$lab/worker-$1/token"
	start "worker-$1" lava-worker --level INFO --url "http://127.0.0.1:$LAVA_PORT/" \
		--token-file "$lab/worker-$1/token" --name "$w" --worker-dir "$lab/worker-$1" \
		--log-file "$lab/logs/worker-$1.log"
}

# No local variables in sh: wait_online counts in n, the callers in i.
wait_online() {
	n=0
	until manage workers details "$1" 2> /dev/null | grep -q "state *: Online"; do
		n=$((n + 1))
		[ $n -lt 120 ] || die "worker $1 did not come online (see $lab/logs/)"
		sleep 0.5
	done
}

etc_listing() {
	find /etc/lava-server -xdev \( -type f -o -type l \) -exec stat -c '%a %U:%G %s %Y %n' {} + 2> /dev/null | sort -k5
}

up() {
	workers=${1:-1}
	case "$workers" in
	'' | *[!0-9]* | 0) die "up: the number of workers must be 1 or more, not '$workers'" ;;
	esac
	command -v lava-server > /dev/null || die "lava-server is not installed: make deps"
	command -v lavacli > /dev/null || die "lavacli is not installed: make deps"
	state_dirs
	say "up changes on this host: the device-type template and device dictionaries"
	say "  under $DEVCONF (originals saved in $backup, put back by down);"
	say "  PostgreSQL started if it is down (down stops it again); in lava-server's"
	say "  database the user kgate (superuser) with an API token, workers"
	say "  $WORKER_PREFIX*, devices kgate-local-*, device types qemu and kgate-qemu,"
	say "  and $SLOGS (these down does not undo)"
	# gunicorn and the scheduler run as lavaserver, which may not be able
	# to reach a checkout under a private folder (/root, mktemp -d):
	# their logs go where it can.
	if ! [ -d "$SLOGS" ]; then
		mkdir -p "$SLOGS"
		say "host: created $SLOGS (lava-server's logs of this lab; down keeps them)"
	fi
	chown lavaserver "$SLOGS"
	kept "$SLOGS (the logs of the lab's gunicorn and lava-scheduler)"

	# PostgreSQL: the Debian cluster, started if it is down.
	if ! pg_lsclusters -h | awk '$4 == "online" { found = 1 } END { exit !found }'; then
		ver=$(pg_lsclusters -h | awk 'NR == 1 { print $1 }')
		clu=$(pg_lsclusters -h | awk 'NR == 1 { print $2 }')
		[ -n "$ver" ] || die "no PostgreSQL cluster (install postgresql: make deps)"
		pg_ctlcluster "$ver" "$clu" start
		echo "$ver $clu" > "$lab/postgresql.started"
		say "PostgreSQL $ver/$clu started (down stops it)"
	fi
	# lava-server's database: set up by its postinst only if PostgreSQL
	# was running then.
	if ! manage users list > /dev/null 2>&1; then
		say "setting up lava-server's database with its own postinst.py: it creates the"
		say "  PostgreSQL role and database lavaserver, writes /etc/lava-server/settings.d/"
		say "  00-secret-key.yaml and 00-database.yaml if missing, and sets owners and modes"
		say "  under /etc/lava-server, /var/lib/lava-server and /var/log/lava-server"
		etc_listing > "$backup/etc-lava-server.before"
		$PY /usr/share/lava-server/postinst.py > "$lab/logs/postinst.out" 2>&1 ||
			die "lava-server postinst failed (see $lab/logs/postinst.out)"
		etc_listing > "$backup/etc-lava-server.after"
		diff "$backup/etc-lava-server.before" "$backup/etc-lava-server.after" |
			sed -n 's/^\([<>]\) /  \1 /p' | while read -r line; do say "host: $line"; done
		kept "lava-server's database setup by postinst.py (PostgreSQL role and database lavaserver, /etc/lava-server/settings.d/00-*.yaml; see $backup/etc-lava-server.before and .after)"
	fi

	# The device dictionaries before the scheduler starts: it marks a
	# device whose dictionary is missing Bad ('down' removes them).
	devconf "$workers"
	start gunicorn /usr/bin/gunicorn3 lava_server.wsgi --log-level info \
		--log-file "$SLOGS/gunicorn.log" -u lavaserver -g lavaserver \
		--worker-class eventlet --workers 2 --bind "127.0.0.1:$LAVA_PORT"
	wait_http "http://127.0.0.1:$LAVA_PORT/api/v0.2/system/version/" "lava-server"
	start scheduler lava-server manage lava-scheduler --level INFO \
		--log-file "$SLOGS/scheduler.log"

	# A user and a token for lavacli; the token lives only in lavacli's
	# own configuration under $lab/config (mode 0600): LAVA makes it and
	# prints it into the pipe to write_config.
	kept "lava-server's database: user kgate (superuser) and its API tokens 'kgate local lab', workers $WORKER_PREFIX*, devices kgate-local-*, device types qemu and kgate-qemu"
	manage users list 2> /dev/null | grep -qw kgate ||
		manage users add --staff --superuser kgate > /dev/null
	if ! XDG_CONFIG_HOME="$lab/config" lavacli -i "$IDENTITY" system version > /dev/null 2>&1; then
		manage tokens add --user kgate --description "kgate local lab" | write_config
		say "lavacli identity $IDENTITY written to $lab/config/lavacli.yaml (mode 0600)"
	fi

	# The workers and their devices: worker i has kgate-local-<i>-qemu and
	# kgate-local-<i>-kgate-qemu. Workers of an earlier 'up' with more of
	# them stay offline: LAVA's scheduler gives jobs only to online ones.
	# (lava-server manage workers update --health fails in 2023.01.)
	for dt in qemu kgate-qemu; do
		manage device-types list 2> /dev/null | grep -qw "$dt" || manage device-types add "$dt" > /dev/null
	done
	i=1
	while [ $i -le "$workers" ]; do
		add_worker $i
		i=$((i + 1))
	done
	start serve $PY tools/kgate.py serve --no-build --port "$SERVE_PORT"
	wait_http "http://127.0.0.1:$SERVE_PORT/" "kgate serve" any
	i=1
	while [ $i -le "$workers" ]; do
		wait_online "$WORKER_PREFIX$i"
		i=$((i + 1))
	done
	say "LAVA $(curl -s "http://127.0.0.1:$LAVA_PORT/api/v0.2/system/version/") on http://127.0.0.1:$LAVA_PORT/, $workers worker(s) online"
	env_lines
}

env_lines() {
	echo "XDG_CONFIG_HOME=$lab/config"
	echo "KGATE_LAB_IDENTITY=$IDENTITY"
	echo "KGATE_LAB_BASE_URL=http://127.0.0.1:$SERVE_PORT/"
}

down() {
	workers=
	for f in "$lab"/worker-*.pid; do
		[ -e "$f" ] || continue
		f=${f##*/}
		workers="$workers ${f%.pid}"
	done
	for name in serve $workers worker scheduler gunicorn; do
		stop "$name"
	done
	if [ -f "$lab/postgresql.started" ]; then
		# shellcheck disable=SC2046
		pg_ctlcluster $(cat "$lab/postgresql.started") stop && say "PostgreSQL stopped"
		rm -f "$lab/postgresql.started"
	fi
	restore_host
	if [ -s "$backup/kept" ]; then
		say "not put back (undo by hand if wanted):"
		while read -r line; do say "  $line"; done < "$backup/kept"
		say "  the Debian packages of make deps"
	fi
}

case "${1:-}" in
up) up "${2:-1}" ;;
down) down ;;
env) env_lines ;;
devconf)
	case "${2:-}" in
	'' | *[!0-9]* | 0) die "devconf: the number of workers must be 1 or more" ;;
	esac
	devconf "$2"
	;;
write-config) write_config ;;
*) echo "usage: $0 up [N]|down|env|devconf N|write-config" >&2; exit 2 ;;
esac
