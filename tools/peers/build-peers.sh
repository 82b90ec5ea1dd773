#!/usr/bin/env bash
# Builds the interoperability peers used by zklock's cross-implementation tests and benchmarks,
# in two sets, one per Debian release:
#
#   Curator 5.4 + kazoo 2.8 (bookworm: this machine's own packages)
#     tools/peers/java/ZkPeer.java -> tools/peers/java/build/ (class files) + launcher tools/peers/java/build/zkpeer
#     tools/peers/python/zkpeer.py -> checked to import kazoo under /usr/bin/python3
#   Curator 5.7.1 (with its ZooKeeper 3.9.3 client) + kazoo 2.9.0 (trixie: unpacked by
#   scripts/peers-trixie.sh into /opt/zklock-peers/trixie, which this script runs if need be)
#     tools/peers/build/curator-5.7.1/ (class files) + launcher tools/peers/build/curator-5.7.1/zkpeer
#     tools/peers/build/kazoo-2.9.0/zkpeer (zkpeer.py with trixie's kazoo first on PYTHONPATH)
#
# Every peer comes from Debian packages, because no Maven repository or PyPI is reachable:
#   libcurator-recipes-java (Curator, pulls curator-client/framework, guava, zookeeper)
#   libslf4j-java           (slf4j-api + slf4j-simple binding)
#   python3-kazoo           (kazoo, for /usr/bin/python3 only)
#
# Idempotent: recompiles only when ZkPeer.java is newer than the class file (or FORCE=1).
# Prints the command lines that run each peer. Exit status is non-zero, with a message on
# stderr, if a package, the trixie folder or a tool is missing: the interop tests run both
# sets, and fail (never skip) without one.
set -euo pipefail

PEERS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JAVA_SRC="$PEERS/java/ZkPeer.java"
BUILD="$PEERS/java/build"
PY_PEER="$PEERS/python/zkpeer.py"
JARDIR="${ZKPEER_JARDIR:-/usr/share/java}"
PYTHON="${ZKPEER_PYTHON:-/usr/bin/python3}"
TRIXIE="${ZKLOCK_PEERS_TRIXIE:-/opt/zklock-peers/trixie}"
NEW_BUILD="$PEERS/build"

die() {
    echo "build-peers: $*" >&2
    exit 1
}

# Minimal classpath, in the order the JVM should search it. Each jar's Debian package is named
# so a missing one says what to install. slf4j-simple is the ONLY slf4j binding on purpose:
# a second binding (nop, jdk14, log4j12, jcl) makes slf4j pick one arbitrarily and warn.
JARS=(
    "curator-recipes.jar:libcurator-recipes-java"
    "curator-framework.jar:libcurator-framework-java"
    "curator-client.jar:libcurator-client-java"
    "zookeeper.jar:libzookeeper-java"
    "zookeeper-jute.jar:libzookeeper-java"
    "guava.jar:libguava-java"
    "slf4j-api.jar:libslf4j-java"
    "slf4j-simple.jar:libslf4j-java"
)

missing=()
CP=""
for entry in "${JARS[@]}"; do
    jar="${entry%%:*}"
    pkg="${entry#*:}"
    if [[ ! -r "$JARDIR/$jar" ]]; then
        missing+=("$JARDIR/$jar (Debian package $pkg)")
        continue
    fi
    CP="${CP:+$CP:}$JARDIR/$jar"
done
if ((${#missing[@]})); then
    printf 'build-peers: missing jar: %s\n' "${missing[@]}" >&2
    die "install them with: apt-get install -y libcurator-recipes-java libslf4j-java zookeeper (the project's setup script does this)"
fi

command -v javac >/dev/null 2>&1 || die "javac not found: install the Debian package default-jdk-headless (the project's setup script does this)"
command -v java >/dev/null 2>&1 || die "java not found: install the Debian package default-jdk-headless (the project's setup script does this)"
[[ -r "$JAVA_SRC" ]] || die "missing $JAVA_SRC"
[[ -r "$PY_PEER" ]] || die "missing $PY_PEER"

# The trixie set: fetched once (scripts/peers-trixie.sh returns at once when it is there).
if [[ ! -r "$TRIXIE/PACKAGES" ]]; then
    ZKLOCK_PEERS_TRIXIE="$TRIXIE" "$PEERS/../../scripts/peers-trixie.sh" >&2 \
        || die "no trixie peers in $TRIXIE, and scripts/peers-trixie.sh failed to fetch them from Debian's trixie suite"
fi
TJARS="$TRIXIE/usr/share/java"
TPY="$TRIXIE/usr/lib/python3/dist-packages"
[[ -r "$TPY/kazoo/version.py" ]] || die "missing $TPY/kazoo: run scripts/peers-trixie.sh (FORCE=1 fetches again)"

# Curator 5.7.1 with the ZooKeeper client trixie packages it with (3.9.3). Curator 5.7.1 also
# runs against bookworm's 3.8.0 client jar (seen with every recipe of hold and latch), but a
# trixie user gets 3.9.3. guava and slf4j are bookworm's: the trixie jars need nothing else.
#
# Order matters, dependencies first. Each Debian jar's manifest Class-Path names
# /usr/share/java/*.jar, which here are bookworm's (Curator 5.4, ZooKeeper 3.8), and the JVM
# searches a jar's Class-Path entries right after that jar, before the -cp entries after it:
# with curator-recipes.jar first, Curator 5.4's framework and ZooKeeper 3.8.0's client would
# win. So jute (zookeeper.jar also carries an older copy of the proto classes), then
# zookeeper, curator-client, -framework, -recipes: every class is then found in a trixie jar
# before any bookworm jar that a manifest adds (`java -verbose:class` shows no Curator or
# ZooKeeper class from /usr/share/java; `zkpeer version` prints 5.7.1 and 3.9.3).
CP57=""
for jar in zookeeper-jute.jar zookeeper.jar curator-client.jar curator-framework.jar curator-recipes.jar; do
    [[ -r "$TJARS/$jar" ]] || die "missing $TJARS/$jar: run scripts/peers-trixie.sh (FORCE=1 fetches again)"
    CP57="${CP57:+$CP57:}$TJARS/$jar"
done
CP57="$CP57:$JARDIR/guava.jar:$JARDIR/slf4j-api.jar:$JARDIR/slf4j-simple.jar"

# --- Java peers ------------------------------------------------------------------------------

# build_java DIR CLASSPATH compiles ZkPeer.java against CLASSPATH into DIR and writes the
# launcher DIR/zkpeer, which pins that classpath. ZKPEER_LOG_LEVEL (default warn) sets
# slf4j-simple's level and ZKPEER_ZK_LOG_LEVEL (default error) that of ZooKeeper's ClientCnxn,
# which warns with a stack trace on every connection refused and on every normal close. Logs go
# to stderr, so stdout carries only the peer protocol.
build_java() {
    local dir=$1 cp=$2 tmp
    mkdir -p "$dir"
    if [[ "${FORCE:-0}" == 1 || ! -f "$dir/ZkPeer.class" || "$JAVA_SRC" -nt "$dir/ZkPeer.class" ]]; then
        rm -f "$dir"/*.class
        javac -nowarn -encoding UTF-8 --release 17 -cp "$cp" -d "$dir" "$JAVA_SRC" \
            || die "javac failed for $JAVA_SRC against $cp"
    fi
    tmp="$(mktemp "$dir/.zkpeer.XXXXXX")"
    cat >"$tmp" <<LAUNCHER
#!/bin/sh
# Generated by tools/peers/build-peers.sh; do not edit.
exec java \\
    -Dorg.slf4j.simpleLogger.defaultLogLevel="\${ZKPEER_LOG_LEVEL:-warn}" \\
    -Dorg.slf4j.simpleLogger.logFile=System.err \\
    -Dorg.slf4j.simpleLogger.log.org.apache.zookeeper.ClientCnxn="\${ZKPEER_ZK_LOG_LEVEL:-error}" \\
    -Dzookeeper.admin.enableServer=false \\
    -cp "$dir:$cp" ZkPeer "\$@"
LAUNCHER
    chmod 0755 "$tmp"
    mv -f "$tmp" "$dir/zkpeer"
}

build_java "$BUILD" "$CP"
build_java "$NEW_BUILD/curator-5.7.1" "$CP57"

# --- Python peers ----------------------------------------------------------------------------
[[ -x "$PYTHON" ]] || die "$PYTHON not found (Debian package python3)"
kazoo_version="$("$PYTHON" -c 'import kazoo.client, kazoo.recipe.lock, kazoo.version; print(kazoo.version.__version__)' 2>/dev/null)" \
    || die "$PYTHON cannot import kazoo: install the Debian package python3-kazoo (the project's setup script does this)"
"$PYTHON" -m py_compile "$PY_PEER" 2>/dev/null || die "$PY_PEER does not compile under $PYTHON"

# kazoo 2.9.0: the same program, trixie's kazoo ahead of bookworm's on the module path (its
# dependencies, six, pure-sasl and the rest, are bookworm's, as for 2.8).
KAZOO29="$NEW_BUILD/kazoo-2.9.0/zkpeer"
mkdir -p "$(dirname "$KAZOO29")"
tmp="$(mktemp "$(dirname "$KAZOO29")/.zkpeer.XXXXXX")"
cat >"$tmp" <<LAUNCHER
#!/bin/sh
# Generated by tools/peers/build-peers.sh; do not edit.
PYTHONPATH="$TPY\${PYTHONPATH:+:\$PYTHONPATH}" exec "$PYTHON" "$PY_PEER" "\$@"
LAUNCHER
chmod 0755 "$tmp"
mv -f "$tmp" "$KAZOO29"
kazoo29="$("$KAZOO29" version 2>/dev/null)" || die "$KAZOO29 version failed"
[[ "$kazoo29" == "VERSION peer kazoo 2.9.0 "* ]] || die "$KAZOO29 loads another kazoo: $kazoo29"
find "$PEERS/python" -name '__pycache__' -type d -prune -exec rm -rf {} +

cat <<EOF
java peer (Curator $(dpkg-query -W -f='${Version}' libcurator-recipes-java 2>/dev/null || echo unknown)):
  $BUILD/zkpeer hold|bench|revoke|latch|setcount|shared|version ...
  # equivalent to: java -cp $BUILD:$CP ZkPeer ...
python peer (kazoo $kazoo_version):
  $PYTHON $PY_PEER hold|bench|version ...
java peer (Curator 5.7.1, $(grep '^libcurator-recipes-java=' "$TRIXIE/PACKAGES" || echo trixie)):
  $NEW_BUILD/curator-5.7.1/zkpeer ...
python peer (kazoo 2.9.0, $(grep '^python3-kazoo=' "$TRIXIE/PACKAGES" || echo trixie)):
  $KAZOO29 hold|bench|version ...
EOF
