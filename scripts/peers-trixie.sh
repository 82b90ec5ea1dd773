#!/usr/bin/env bash
# peers-trixie.sh fetches the newer interop peers from Debian's trixie suite:
# Apache Curator 5.7.1 (libcurator-{client,framework,recipes}-java), the
# ZooKeeper 3.9 client it is packaged with (libzookeeper-java) and kazoo
# 2.9.0 (python3-kazoo), unpacked (dpkg -x, never installed) into
#
#   ${ZKLOCK_PEERS_TRIXIE:-/opt/zklock-peers/trixie}/usr/share/java/*.jar
#   ${ZKLOCK_PEERS_TRIXIE:-/opt/zklock-peers/trixie}/usr/lib/python3/dist-packages/kazoo
#
# tools/peers/build-peers.sh builds the second set of peers from there; the
# first set (Curator 5.4, kazoo 2.8) is this machine's own bookworm packages.
# The jars need nothing that bookworm lacks: guava, slf4j and the rest of
# their manifests' Class-Path come from /usr/share/java (tools/peers/README.md).
#
# apt reads a sources list of its own (trixie main, signed by Debian's
# archive keyring) with its own state and cache under the folder, so the
# machine's own apt sources, lists and dpkg database are never touched, and
# no other registry is asked. Idempotent: once the folder holds the packages
# (its file PACKAGES names them), it returns at once without the network;
# FORCE=1 fetches again. Status goes to stderr; exit status non-zero, with
# the reason, on failure.
set -euo pipefail

readonly DEST=${ZKLOCK_PEERS_TRIXIE:-/opt/zklock-peers/trixie}
readonly STAMP=$DEST/PACKAGES
# Package, and the upstream version its trixie candidate must have: a point
# release of the same upstream version (a new Debian revision) is taken, a
# new upstream version is refused, so the tests' names stay true.
readonly WANT=(
	"libcurator-client-java 5.7.1"
	"libcurator-framework-java 5.7.1"
	"libcurator-recipes-java 5.7.1"
	"libzookeeper-java 3.9.3"
	"python3-kazoo 2.9.0"
)
# What the peers load: build-peers.sh reads these paths.
readonly FILES=(
	usr/share/java/curator-recipes.jar
	usr/share/java/curator-framework.jar
	usr/share/java/curator-client.jar
	usr/share/java/zookeeper.jar
	usr/share/java/zookeeper-jute.jar
	usr/lib/python3/dist-packages/kazoo/version.py
)

log() { printf 'peers-trixie: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

complete() {
	[[ -s $STAMP ]] || return 1
	local f
	for f in "${FILES[@]}"; do
		[[ -e $DEST/$f ]] || return 1
	done
}

if [[ ${FORCE:-0} != 1 ]] && complete; then
	log "present in $DEST: $(tr '\n' ' ' <"$STAMP")"
	exit 0
fi

command -v apt-get >/dev/null || die "apt-get not found: the trixie peers come from Debian packages"
command -v dpkg >/dev/null || die "dpkg not found"
readonly KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
[[ -r $KEYRING ]] || die "$KEYRING missing (Debian package debian-archive-keyring)"

if ! mkdir -p "$(dirname "$DEST")" 2>/dev/null || [[ ! -w $(dirname "$DEST") ]]; then
	die "cannot write $(dirname "$DEST"): run as root (scripts/setup.sh does), or set ZKLOCK_PEERS_TRIXIE to a folder of yours"
fi
work=$(mktemp -d "$(dirname "$DEST")/.trixie.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/apt/state/lists/partial" "$work/apt/cache/archives/partial" "$work/debs" "$work/root"
echo "deb [signed-by=$KEYRING] http://deb.debian.org/debian trixie main" >"$work/apt/sources.list"
: >"$work/apt/status"
apt_opts=(
	-o "Dir::State=$work/apt/state"
	-o "Dir::State::status=$work/apt/status"
	-o "Dir::Cache=$work/apt/cache"
	-o "Dir::Etc::SourceList=$work/apt/sources.list"
	-o "Dir::Etc::SourceParts=/nonexistent"
	-o "APT::Sandbox::User=root"
)

log "reading trixie's package lists (own sources list and state under $work)"
apt-get "${apt_opts[@]}" -qq update >&2 || die "apt-get update of trixie failed"

pkgs=()
for entry in "${WANT[@]}"; do
	read -r pkg upstream <<<"$entry"
	version=$(apt-cache "${apt_opts[@]}" policy "$pkg" | awk '/Candidate:/ {print $2}')
	[[ -n $version && $version != "(none)" ]] || die "trixie has no $pkg"
	[[ $version == "$upstream"[-+~]* ]] || die "trixie's $pkg is $version, not upstream $upstream: update scripts/peers-trixie.sh and the tests' names"
	pkgs+=("$pkg=$version")
done

log "downloading ${pkgs[*]}"
(cd "$work/debs" && apt-get "${apt_opts[@]}" -qq download "${pkgs[@]}") >&2 || die "apt-get download failed"
for deb in "$work"/debs/*.deb; do
	dpkg -x "$deb" "$work/root"
done
printf '%s\n' "${pkgs[@]}" >"$work/root/PACKAGES"

# Swap the folder in whole, so a reader never sees half of it.
rm -rf "$DEST.old"
[[ -e $DEST ]] && mv "$DEST" "$DEST.old"
mv "$work/root" "$DEST"
rm -rf "$DEST.old"
complete || die "unpacked, but $DEST lacks one of: ${FILES[*]}"
log "unpacked into $DEST: ${pkgs[*]}"
