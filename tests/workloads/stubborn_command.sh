#!/bin/sh
# A command that is hard to stop: it ignores SIGTERM and spins, and starts two processes that ignore
# SIGTERM too: a child in its process group, and a daemon that leaves its session (setsid) and whose
# parent exits at once, so that it is nobody's child any more. Each writes its PID to DIR/NAME.pid when it
# runs. Usage: stubborn_command.sh DIR
dir=$1
trap '' TERM
sh -c 'trap "" TERM; echo $$ > "$1/child.tmp" && mv "$1/child.tmp" "$1/child.pid"; while :; do :; done' sh "$dir" &
sh -c 'setsid sh -c '\''trap "" TERM; echo $$ > "$1/daemon.tmp" && mv "$1/daemon.tmp" "$1/daemon.pid"; exec sleep 1000'\'' sh "$1" &' sh "$dir"
echo $$ > "$dir/command.tmp" && mv "$dir/command.tmp" "$dir/command.pid"
while :; do :; done
