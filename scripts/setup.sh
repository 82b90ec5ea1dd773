#!/usr/bin/env bash
# setup.sh prepares this machine to run zklock's tests and demo. Its modes:
#
#   scripts/setup.sh           what make test and CI need: every package below,
#                              a Docker engine, the image the tests use (written
#                              to .zklock-image and printed on stdout), and both
#                              offline images, zklock-zookeeper:3.8 and :3.9,
#                              when the tests use one of them.
#   scripts/setup.sh demo      what make demo needs: Docker (and mmdebstrap if an
#                              image must be built) and the image the tests use;
#                              no JDK, peers or model checker.
#   scripts/setup.sh image V   Docker and the image for ZooKeeper V, printed on
#                              stdout: 3.8 or 3.9 name the offline images, built
#                              if missing; anything with a ':' is an image name,
#                              pulled if missing. .zklock-image is left alone.
#   scripts/setup.sh running   says what earlier runs left running, and how to
#                              stop it (make demo ends with it).
#   scripts/setup.sh stop-docker  stops the dockerd an earlier run started (by
#                              the pid in its pid file) and says what it did.
#
# Packages are installed without their recommended ones, plus the few of
# docker.io's that this machine needs (install_packages says which): onto a
# minimal Debian 12, docker.io brings 126 packages with its recommended ones
# (criu, needrestart, git, systemd, ...), 15 without; the engine so installed
# runs, builds, pauses and unpauses containers.
#
# The image the tests use, first match wins:
#   - $ZKLOCK_ZK_IMAGE if set (an offline image is built if named and missing);
#   - zookeeper:3.9 if present or pullable;
#   - zklock-zookeeper:3.8, built from Debian packages with no registry.
#
# The offline images (docker/zookeeper): zklock-zookeeper:3.8 from Debian 12
# (bookworm, ZooKeeper 3.8.0), zklock-zookeeper:3.9 from Debian 13 (trixie,
# ZooKeeper 3.9.3), each on a base imported from an mmdebstrap tarball. A base
# takes one to five minutes to build, depending on the mirror (53s here for
# trixie's, 264s on a newcomer's machine for bookworm's), once; the thin layer
# on it is rebuilt in seconds when docker/zookeeper changes.
#
# It is idempotent and takes seconds once everything is in place. Status goes
# to stderr; stdout carries only the image name, so callers can capture it.
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."

readonly OFFICIAL_IMAGE=zookeeper:3.9
readonly LOCAL_REPO=zklock-zookeeper
# The offline image for make test's default, and the versions built offline.
readonly LOCAL_DEFAULT=3.8
readonly LOCAL_VERSIONS=(3.8 3.9)
readonly LOCAL_IMAGE=$LOCAL_REPO:$LOCAL_DEFAULT
readonly LOCAL_CONTEXT=docker/zookeeper
readonly IMAGE_FILE=.zklock-image
readonly DOCKERD_LOG=/var/log/zklock-dockerd.log
readonly DOCKERD_PIDFILE=${ZKLOCK_DOCKERD_PIDFILE:-/run/zklock-dockerd.pid}
# Written when this script started docker.service through systemd.
readonly DOCKER_SERVICE_MARK=${ZKLOCK_DOCKER_SERVICE_MARK:-/run/zklock-docker.service}
readonly PULL_TIMEOUT=${ZKLOCK_PULL_TIMEOUT:-60}

started=$SECONDS

log() { printf 'setup: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

SUDO=
if [[ $(id -u) -ne 0 ]]; then
	if command -v sudo >/dev/null; then
		SUDO=sudo
	else
		log "not root and no sudo: installing packages or starting dockerd will fail"
	fi
fi

installed() {
	[[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]
}

docker_answers() { docker info >/dev/null 2>&1; }

# started_dockerd prints the pid of the dockerd an earlier run of this script
# started, if that process is still a dockerd.
started_dockerd() {
	local pid
	[[ -s $DOCKERD_PIDFILE ]] || return 1
	pid=$(<"$DOCKERD_PIDFILE")
	[[ $(cat "/proc/$pid/comm" 2>/dev/null) == dockerd ]] || return 1
	# A zombie (exited, not yet reaped) keeps its name but runs no more.
	[[ $(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null) != Z ]] || return 1
	echo "$pid"
}

# install_packages installs what is missing of what mode needs (see the top).
install_packages() {
	local mode=$1 missing=()
	# Any working Docker engine will do (docker-ce, a remote DOCKER_HOST):
	# docker.io is only needed when there is neither a daemon nor a client.
	if ! command -v docker >/dev/null || { ! command -v dockerd >/dev/null && ! docker_answers; }; then
		installed docker.io || missing+=(docker.io)
		# Of docker.io's recommended packages, only those this machine needs:
		# apparmor where the kernel enforces AppArmor (dockerd loads its
		# containers' profile with apparmor_parser: moby/moby#44900),
		# cgroupfs-mount where no systemd mounts the cgroups, ca-certificates
		# to pull from a registry. Not criu, needrestart, git or xz-utils.
		if [[ $(cat /sys/module/apparmor/parameters/enabled 2>/dev/null) == Y* ]]; then
			installed apparmor || missing+=(apparmor)
		fi
		[[ -d /run/systemd/system ]] || installed cgroupfs-mount || missing+=(cgroupfs-mount)
		installed ca-certificates || missing+=(ca-certificates)
	fi
	local pkg pkgs=()
	# mmdebstrap builds the offline images (installed on demand otherwise).
	# iptables and util-linux (nsenter): zktest's Ensemble.Isolate filters a
	# server's traffic from inside its container's network namespace. spin
	# (and gcc, which it needs) model-checks the lease deadline (make model).
	# zookeeper, Curator and kazoo: the interop tests' peers.
	[[ $mode == test ]] && pkgs+=(mmdebstrap zookeeper libcurator-recipes-java python3-kazoo iptables util-linux spin gcc)
	for pkg in ${pkgs[@]+"${pkgs[@]}"}; do
		installed "$pkg" || missing+=("$pkg")
	done
	if [[ $mode == test ]]; then
		command -v javac >/dev/null || missing+=(default-jdk-headless)
		command -v make >/dev/null || missing+=(make)
	fi

	if [[ ${#missing[@]} -eq 0 ]]; then
		log "packages: all present"
		return
	fi
	apt_install "${missing[@]}"
}

# apt_install installs the packages named, without their recommended ones.
apt_install() {
	local missing=("$@")
	if ! command -v apt-get >/dev/null; then
		log "not Debian (no apt-get); install these yourself if the tests need them: ${missing[*]}"
		return
	fi
	log "installing ${missing[*]} (without recommended packages)"
	local t0=$SECONDS
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
	log "packages: installed in $((SECONDS - t0))s"
}

start_docker() {
	if docker_answers; then
		log "docker: engine answers"
		return
	fi
	command -v docker >/dev/null || die "no docker client"

	if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null; then
		log "docker: starting docker.service"
		if $SUDO systemctl start docker >&2; then
			$SUDO touch "$DOCKER_SERVICE_MARK"
		else
			log "docker: systemctl start docker failed"
		fi
	fi

	if ! docker_answers; then
		local pid
		if pid=$(started_dockerd); then
			log "docker: dockerd (pid $pid) is still starting"
		elif pgrep -x dockerd >/dev/null; then
			log "docker: a dockerd not started by this script is running; waiting for it"
		else
			command -v dockerd >/dev/null || die "no dockerd to start"
			log "docker: starting dockerd in the background (log $DOCKERD_LOG, pid file $DOCKERD_PIDFILE)"
			# setsid: the daemon must outlive this script and its terminal.
			$SUDO setsid dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
			echo $! | $SUDO tee "$DOCKERD_PIDFILE" >/dev/null
		fi
	fi

	local deadline=$((SECONDS + 60)) pid
	pid=$(started_dockerd) || pid=
	until docker_answers; do
		if [[ -n $pid ]] && ! started_dockerd >/dev/null; then
			tail -n 20 "$DOCKERD_LOG" >&2 2>/dev/null || true
			die "docker: dockerd (pid $pid) exited; see $DOCKERD_LOG"
		fi
		if ((SECONDS >= deadline)); then
			tail -n 20 "$DOCKERD_LOG" >&2 2>/dev/null || true
			die "docker: no answer from 'docker info' after 60s"
		fi
		sleep 0.5
	done
	log "docker: engine answers after $((SECONDS - started))s"
}

image_present() { docker image inspect "$1" >/dev/null 2>&1; }

# context_hash identifies the offline images' build context, so a change to the
# Dockerfile or its scripts triggers a rebuild and nothing else does.
context_hash() {
	find "$LOCAL_CONTEXT" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
}

# debian_root prints the Debian suite, then mmdebstrap's mirror arguments (one
# a line), of the offline image of ZooKeeper $1.
debian_root() {
	case $1 in
	3.8)
		# No mirror argument: deb.debian.org plus bookworm-updates and
		# -security, which mmdebstrap adds for a stable suite.
		echo bookworm
		;;
	3.9)
		# Named in full, since mmdebstrap 1.3.5 (bookworm's) may not know
		# trixie for the stable release it now is; the machine's own
		# sources (bookworm's) are left alone.
		local key=/usr/share/keyrings/debian-archive-keyring.gpg
		echo trixie
		echo "deb [signed-by=$key] http://deb.debian.org/debian trixie main"
		echo "deb [signed-by=$key] http://deb.debian.org/debian trixie-updates main"
		echo "deb [signed-by=$key] http://deb.debian.org/debian-security trixie-security main"
		;;
	*) die "no offline image for ZooKeeper $1 (known: ${LOCAL_VERSIONS[*]})" ;;
	esac
}

# build_base_image imports a Debian root file system with ZooKeeper $1's
# package as $LOCAL_REPO:$1-base.
build_base_image() {
	local version=$1 base=$LOCAL_REPO:$1-base tmp suite
	local root mirrors=()
	root=$(debian_root "$version")
	suite=$(head -n 1 <<<"$root")
	mapfile -t mirrors < <(tail -n +2 <<<"$root")
	tmp=$(mktemp -d)
	# The tarball is about 700 MB: never leave it behind, even on failure.
	trap 'rm -rf "$tmp"' EXIT
	log "image: building $base from Debian $suite with mmdebstrap (one to five minutes, once)"
	local t0=$SECONDS
	# libnetty-java comes with zookeeper anyway; named because TLS needs three
	# of its jars that zookeeper.jar's manifest leaves out (zkServer.sh).
	$SUDO mmdebstrap --quiet --variant=apt --include=zookeeper,default-jre-headless,libnetty-java \
		"$suite" "$tmp/rootfs.tar" ${mirrors[@]+"${mirrors[@]}"} >&2 </dev/null
	docker import "$tmp/rootfs.tar" "$base" >&2
	rm -rf "$tmp"
	trap - EXIT
	log "image: $base built in $((SECONDS - t0))s"
}

# ensure_local_image builds the offline image of ZooKeeper $1 unless it is up
# to date, and prints its name.
ensure_local_image() {
	local version=$1 image=$LOCAL_REPO:$1 base=$LOCAL_REPO:$1-base want have
	debian_root "$version" >/dev/null
	want=$(context_hash)
	have=$(docker image inspect -f '{{index .Config.Labels "org.zkrecipes.zklock.context"}}' "$image" 2>/dev/null || true)
	if [[ $have == "$want" ]]; then
		log "image: $image is up to date"
		echo "$image"
		return
	fi
	if ! image_present "$base"; then
		command -v mmdebstrap >/dev/null || apt_install mmdebstrap
		command -v mmdebstrap >/dev/null || die "mmdebstrap is needed to build $image"
		build_base_image "$version"
	fi
	log "image: building $image from $LOCAL_CONTEXT on $base"
	local t0=$SECONDS
	docker build --quiet --build-arg "BASE=$base" --label "org.zkrecipes.zklock.context=$want" \
		-t "$image" "$LOCAL_CONTEXT" >&2
	log "image: $image built in $((SECONDS - t0))s"
	echo "$image"
}

# local_version prints the version of the offline image named $1, if it is one.
local_version() {
	local v
	for v in "${LOCAL_VERSIONS[@]}"; do
		if [[ $1 == "$LOCAL_REPO:$v" ]]; then
			echo "$v"
			return
		fi
	done
	return 1
}

try_pull() {
	log "image: trying 'docker pull $1' (timeout ${PULL_TIMEOUT}s)"
	timeout "$PULL_TIMEOUT" docker pull --quiet "$1" >&2
}

# named_image makes the image named $1 present (built if it is an offline
# one, else pulled) and prints its name.
named_image() {
	local v
	if v=$(local_version "$1"); then
		ensure_local_image "$v"
	elif image_present "$1" || try_pull "$1"; then
		echo "$1"
	else
		die "image $1 is neither present nor pullable"
	fi
}

# choose_image prints the image the tests use (see the top).
choose_image() {
	if [[ -n ${ZKLOCK_ZK_IMAGE:-} ]]; then
		log "image: ZKLOCK_ZK_IMAGE=$ZKLOCK_ZK_IMAGE"
		named_image "$ZKLOCK_ZK_IMAGE"
		return
	fi
	if image_present "$OFFICIAL_IMAGE"; then
		log "image: $OFFICIAL_IMAGE is present"
		echo "$OFFICIAL_IMAGE"
		return
	fi
	# A failed pull can take the whole timeout. Once an earlier run settled on
	# the local image, keep it: delete .zklock-image to try the registry again.
	if [[ -f $IMAGE_FILE && $(<"$IMAGE_FILE") == "$LOCAL_IMAGE" ]]; then
		log "image: $IMAGE_FILE says $LOCAL_IMAGE; not trying the registry again"
	elif try_pull "$OFFICIAL_IMAGE"; then
		echo "$OFFICIAL_IMAGE"
		return
	else
		log "image: $OFFICIAL_IMAGE cannot be pulled; using the offline image"
	fi
	ensure_local_image "$LOCAL_DEFAULT"
}

# running says what this script's runs left running and how to stop it.
running() {
	local pid
	if pid=$(started_dockerd); then
		log "left running: dockerd (pid $pid, started by scripts/setup.sh; log $DOCKERD_LOG)."
		log "  Stop it with 'make stop-docker' (containers still running go with it)."
	elif [[ -e $DOCKER_SERVICE_MARK ]] && systemctl is-active --quiet docker 2>/dev/null; then
		log "left running: docker.service, started by scripts/setup.sh through systemd."
		log "  Stop it with 'systemctl stop docker.service docker.socket'."
	else
		log "left running: nothing started by scripts/setup.sh (any Docker engine here was already running)."
	fi
	local ours
	ours=$(docker ps -q --filter label=org.zkrecipes.zktest 2>/dev/null | wc -l)
	if ((ours > 0)); then
		log "  $ours zktest container(s) still run: docker ps --filter label=org.zkrecipes.zktest"
	fi
	log "  The images stay: docker image ls $LOCAL_REPO (about 700 MB each; docker image rm to free them)."
}

# stop_docker stops the dockerd this script started, by the pid in its pid
# file, and says what it did. It stops nothing else.
stop_docker() {
	local pid
	if ! pid=$(started_dockerd); then
		if [[ -s $DOCKERD_PIDFILE ]]; then
			log "stop-docker: the dockerd of $DOCKERD_PIDFILE (pid $(<"$DOCKERD_PIDFILE")) is not running; nothing stopped"
			$SUDO rm -f "$DOCKERD_PIDFILE"
		else
			log "stop-docker: no dockerd started by scripts/setup.sh (no $DOCKERD_PIDFILE); nothing stopped"
		fi
		if [[ -e $DOCKER_SERVICE_MARK ]]; then
			log "stop-docker: docker.service was started through systemd: systemctl stop docker.service docker.socket"
		fi
		return
	fi
	log "stop-docker: stopping dockerd (pid $pid, started by scripts/setup.sh) with SIGTERM"
	$SUDO kill -TERM "$pid"
	local deadline=$((SECONDS + 30))
	while started_dockerd >/dev/null; do
		((SECONDS < deadline)) || die "stop-docker: dockerd (pid $pid) still runs after 30s; see $DOCKERD_LOG"
		sleep 0.2
	done
	$SUDO rm -f "$DOCKERD_PIDFILE"
	log "stop-docker: dockerd (pid $pid) stopped after $((SECONDS - deadline + 30))s; its containers stopped with it"
}

mode=${1:-test}
case $mode in
test | demo)
	install_packages "$mode"
	# The interop suite's newer peers (Curator 5.7.1, kazoo 2.9.0) from trixie, into a folder of
	# their own: seconds the first time, nothing after.
	[[ $mode == test ]] && $SUDO scripts/peers-trixie.sh
	start_docker
	image=$(choose_image)
	echo "$image" >"$IMAGE_FILE"
	if [[ $mode == test ]] && local_version "$image" >/dev/null; then
		# CI runs the server tests on every offline version (make test-server).
		for v in "${LOCAL_VERSIONS[@]}"; do
			[[ $LOCAL_REPO:$v == "$image" ]] || ensure_local_image "$v" >/dev/null
		done
	fi
	log "done in $((SECONDS - started))s; ZooKeeper image: $image (saved in $IMAGE_FILE)"
	echo "$image"
	;;
image)
	[[ $# -eq 2 && -n $2 ]] || die "usage: $0 image VERSION|IMAGE (versions: ${LOCAL_VERSIONS[*]})"
	install_packages image
	start_docker
	if [[ $2 == *:* ]]; then
		image=$(named_image "$2")
	else
		image=$(ensure_local_image "$2")
	fi
	log "done in $((SECONDS - started))s; ZooKeeper image: $image"
	echo "$image"
	;;
running) running ;;
stop-docker) stop_docker ;;
*) die "unknown mode $mode (test, demo, image VERSION, running, stop-docker)" ;;
esac
