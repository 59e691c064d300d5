#!/bin/sh
# Install every Debian package kgate uses; idempotent. Run as root on
# Debian 12 (bookworm). Cross toolchains and QEMU come from targets.yaml.
set -eu
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
	echo "deps: must run as root (apt-get)" >&2
	exit 1
fi

# deb-src entries, so that 'apt-get source busybox' works. Mirror the
# deb822 sources the machine already has, only with Types: deb-src.
src=/etc/apt/sources.list.d/kgate-deb-src.sources
if ! grep -rqs '^Types:.*deb-src\|^deb-src ' /etc/apt/sources.list /etc/apt/sources.list.d/; then
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		sed -n 's/^Types:.*/Types: deb-src/p; /^\(URIs\|Suites\|Components\|Signed-By\):/p; /^$/p' \
			/etc/apt/sources.list.d/debian.sources > "$src.tmp"
	else
		cat > "$src.tmp" <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	fi
	mv "$src.tmp" "$src"
	echo "deps: added deb-src entries in $src"
fi

pkgs="linux-source-6.1 make gcc libc6-dev flex bison bc libelf-dev libssl-dev
ccache cpio gzip xz-utils patch perl dpkg-dev iproute2
python3-jinja2 python3-yaml python3-pytest python3-hypothesis python3-jsonschema python3-rfc3987 lava-dispatcher chromium"

apt-get update -qq
# --no-install-recommends: lava-dispatcher recommends ~1.8 GB (a host
# kernel, libguestfs) that a QEMU tmpfs job with cpio overlays never uses.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs
# Per target: cross compiler, its libc, QEMU (python3-yaml is in now).
tpkgs=$(/usr/bin/python3 tools/kgate.py packages)
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $tpkgs

# The LAVA lab path and its test (tools/lab-local.sh): lavacli, and a
# real lava-server. PostgreSQL must be running while lava-server is
# installed, or its postinst silently skips the database setup.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	postgresql curl lavacli
started=
if ! pg_lsclusters -h | grep -q .; then
	pg_createcluster "$(ls /usr/lib/postgresql | sort -n | tail -1)" main > /dev/null
fi
if ! pg_lsclusters -h | awk '$4 == "online" { f = 1 } END { exit !f }'; then
	started=$(pg_lsclusters -h | awk 'NR == 1 { print $1, $2 }')
	# shellcheck disable=SC2086
	pg_ctlcluster $started start
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends lava-server
if ! lava-server manage users list > /dev/null 2>&1; then
	/usr/bin/python3 /usr/share/lava-server/postinst.py > /dev/null
fi
if [ -n "$started" ]; then
	# shellcheck disable=SC2086
	pg_ctlcluster $started stop
fi
echo "deps: ready: $(echo $pkgs $tpkgs postgresql curl lavacli lava-server | tr '\n' ' ')"
