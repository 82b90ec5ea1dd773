#!/bin/bash
# zkServer.sh for the offline ZooKeeper image: the part of ZooKeeper's own
# script that a container needs. Debian's package keeps the server in
# /usr/share/java with a manifest Class-Path, so the classpath stays short:
# adding every jar in /usr/share/java would put several slf4j bindings on it.
set -e

ZOOMAIN=org.apache.zookeeper.server.quorum.QuorumPeerMain
ZOOCFGDIR=${ZOOCFGDIR:-/conf}
ZOOCFG=${ZOOCFG:-$ZOOCFGDIR/zoo.cfg}
ZOO_LOG_DIR=${ZOO_LOG_DIR:-/logs}
# log4j.properties (with a CONSOLE appender) comes from conf_example; log4j 1.2
# with its slf4j binding sends the server's log to stdout, like the official image.
# zookeeper.jar's manifest names netty-handler and netty-transport but not the
# three jars of libnetty-java that the Netty connection factory (TLS,
# secureClientPort) also needs: without them, a TLS server fails to start.
# zookeeper-jute.jar comes before zookeeper.jar: Debian's 3.9.3 server jar
# carries an older copy of the wire's proto classes, and with it first every
# connect fails (NoSuchMethodError: ConnectRequest.setReadOnly); 3.8.0's two
# jars agree, so the order is harmless there.
CLASSPATH=/etc/zookeeper/conf_example:/usr/share/java/zookeeper-jute.jar:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar
CLASSPATH+=:/usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar:/usr/share/java/netty-transport-native-unix-common.jar
JAVA=${JAVA:-java}

usage() {
    echo "usage: $0 {start-foreground|print-cmd|version|check} [zoo.cfg]" >&2
    exit 2
}

[[ $# -ge 1 ]] || usage
if [[ -n $2 ]]; then
    ZOOCFG=$2
fi

cmd=(
    "$JAVA"
    "-Dzookeeper.log.dir=$ZOO_LOG_DIR"
    "-Dzookeeper.root.logger=${ZOO_LOG4J_PROP:-INFO,CONSOLE}"
    "-Xmx${ZK_SERVER_HEAP:-1000}m"
)
# JVMFLAGS and SERVER_JVMFLAGS are word-split on purpose, as upstream does.
# shellcheck disable=SC2206
cmd+=($SERVER_JVMFLAGS $JVMFLAGS -cp "$CLASSPATH" "$ZOOMAIN" "$ZOOCFG")

case $1 in
start-foreground)
    echo "Using config: $ZOOCFG" >&2
    exec "${cmd[@]}"
    ;;
print-cmd)
    echo "${cmd[*]}"
    ;;
version)
    exec "$JAVA" -cp "$CLASSPATH" org.apache.zookeeper.version.VersionInfoMain
    ;;
check)
    for jar in ${CLASSPATH//:/ }; do
        [[ -e $jar ]] || { echo "$0: missing $jar" >&2; exit 1; }
    done
    command -v "$JAVA" >/dev/null || { echo "$0: no $JAVA" >&2; exit 1; }
    ;;
*)
    usage
    ;;
esac
