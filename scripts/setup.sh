#!/usr/bin/env bash
# setup.sh prepares this machine to run zklock's tests and demo:
#
#   1. installs what is missing (Debian): docker.io, mmdebstrap and zookeeper to
#      build an image offline, a JDK, the interop peers Curator and kazoo,
#      spin for the model of the lease deadline, and make;
#   2. starts a Docker engine in the background if none answers;
#   3. chooses the ZooKeeper image the tests use, building it offline if needed,
#      writes its name to .zklock-image and prints it on stdout.
#
# Image choice, first match wins:
#   - $ZKLOCK_ZK_IMAGE if set (the local image is built if named and missing);
#   - zookeeper:3.9 if present or pullable;
#   - zklock-zookeeper:3.8, built from Debian packages with no registry.
#
# It is idempotent and takes seconds once everything is in place. Status goes
# to stderr; stdout carries only the image name, so callers can capture it.
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."

readonly OFFICIAL_IMAGE=zookeeper:3.9
readonly LOCAL_IMAGE=zklock-zookeeper:3.8
readonly LOCAL_BASE_IMAGE=zklock-zookeeper:3.8-base
readonly LOCAL_CONTEXT=docker/zookeeper
readonly IMAGE_FILE=.zklock-image
readonly DOCKERD_LOG=/var/log/zklock-dockerd.log
readonly DOCKERD_PIDFILE=/run/zklock-dockerd.pid
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
	echo "$pid"
}

install_packages() {
	local missing=()
	# Any working Docker engine will do (docker-ce, a remote DOCKER_HOST):
	# docker.io is only needed when there is neither a daemon nor a client.
	if ! command -v docker >/dev/null || { ! command -v dockerd >/dev/null && ! docker_answers; }; then
		installed docker.io || missing+=(docker.io)
	fi
	local pkg
	# iptables and util-linux (nsenter): zktest's Ensemble.Isolate filters a
	# server's traffic from inside its container's network namespace. spin
	# (and gcc, which it needs) model-checks the lease deadline (make model).
	for pkg in mmdebstrap zookeeper libcurator-recipes-java python3-kazoo iptables util-linux spin gcc; do
		installed "$pkg" || missing+=("$pkg")
	done
	command -v javac >/dev/null || missing+=(default-jdk-headless)
	command -v make >/dev/null || missing+=(make)

	if [[ ${#missing[@]} -eq 0 ]]; then
		log "packages: all present"
		return
	fi
	if ! command -v apt-get >/dev/null; then
		log "not Debian (no apt-get); install these yourself if the tests need them: ${missing[*]}"
		return
	fi
	log "installing ${missing[*]}"
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
}

start_docker() {
	if docker_answers; then
		log "docker: engine answers"
		return
	fi
	command -v docker >/dev/null || die "no docker client"

	if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null; then
		log "docker: starting docker.service"
		$SUDO systemctl start docker >&2 || log "docker: systemctl start docker failed"
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

# context_hash identifies the local image's build context, so a change to the
# Dockerfile or its scripts triggers a rebuild and nothing else does.
context_hash() {
	find "$LOCAL_CONTEXT" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
}

build_base_image() {
	local tmp
	tmp=$(mktemp -d)
	# The tarball is about 300 MB: never leave it behind, even on failure.
	trap 'rm -rf "$tmp"' EXIT
	log "image: building $LOCAL_BASE_IMAGE with mmdebstrap (about a minute)"
	local t0=$SECONDS
	# No mirror argument: deb.debian.org plus bookworm-updates and -security.
	# libnetty-java comes with zookeeper anyway; named because TLS needs three
	# of its jars that zookeeper.jar's manifest leaves out (zkServer.sh).
	$SUDO mmdebstrap --quiet --variant=apt --include=zookeeper,default-jre-headless,libnetty-java \
		bookworm "$tmp/rootfs.tar" >&2
	docker import "$tmp/rootfs.tar" "$LOCAL_BASE_IMAGE" >&2
	rm -rf "$tmp"
	trap - EXIT
	log "image: $LOCAL_BASE_IMAGE built in $((SECONDS - t0))s"
}

ensure_local_image() {
	local want have
	want=$(context_hash)
	have=$(docker image inspect -f '{{index .Config.Labels "org.zkrecipes.zklock.context"}}' "$LOCAL_IMAGE" 2>/dev/null || true)
	if [[ $have == "$want" ]]; then
		log "image: $LOCAL_IMAGE is up to date"
		return
	fi
	command -v mmdebstrap >/dev/null || die "mmdebstrap is needed to build $LOCAL_IMAGE"
	image_present "$LOCAL_BASE_IMAGE" || build_base_image
	log "image: building $LOCAL_IMAGE from $LOCAL_CONTEXT"
	docker build --quiet --label "org.zkrecipes.zklock.context=$want" -t "$LOCAL_IMAGE" "$LOCAL_CONTEXT" >&2
}

try_pull() {
	log "image: trying 'docker pull $1' (timeout ${PULL_TIMEOUT}s)"
	timeout "$PULL_TIMEOUT" docker pull --quiet "$1" >&2
}

choose_image() {
	if [[ -n ${ZKLOCK_ZK_IMAGE:-} ]]; then
		log "image: ZKLOCK_ZK_IMAGE=$ZKLOCK_ZK_IMAGE"
		if [[ $ZKLOCK_ZK_IMAGE == "$LOCAL_IMAGE" ]]; then
			ensure_local_image
		elif ! image_present "$ZKLOCK_ZK_IMAGE"; then
			try_pull "$ZKLOCK_ZK_IMAGE" || die "image $ZKLOCK_ZK_IMAGE is neither present nor pullable"
		fi
		image=$ZKLOCK_ZK_IMAGE
		return
	fi
	if image_present "$OFFICIAL_IMAGE"; then
		log "image: $OFFICIAL_IMAGE is present"
		image=$OFFICIAL_IMAGE
		return
	fi
	# A failed pull can take the whole timeout. Once an earlier run settled on
	# the local image, keep it: delete .zklock-image to try the registry again.
	if [[ -f $IMAGE_FILE && $(<"$IMAGE_FILE") == "$LOCAL_IMAGE" ]]; then
		log "image: $IMAGE_FILE says $LOCAL_IMAGE; not trying the registry again"
	elif try_pull "$OFFICIAL_IMAGE"; then
		image=$OFFICIAL_IMAGE
		return
	else
		log "image: $OFFICIAL_IMAGE cannot be pulled; using the offline image"
	fi
	ensure_local_image
	image=$LOCAL_IMAGE
}

install_packages
start_docker
image=
choose_image
echo "$image" >"$IMAGE_FILE"
log "done in $((SECONDS - started))s; ZooKeeper image: $image (saved in $IMAGE_FILE)"
echo "$image"
