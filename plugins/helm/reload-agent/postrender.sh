#!/bin/sh
# postrender.sh - the command of reload-agent's Helm post-renderer plugin
# (plugin.yaml, docs/render-plugins.md): the rendered manifests on stdin,
# `reload-agent inject` of them on stdout. All or nothing: on any error
# inject writes nothing and exits non-zero, and Helm stops. The arguments
# (--post-renderer-args) go to inject. Helm 4 keeps a post-renderer's
# stderr to itself (it says only "exited with error"): inject's report,
# and its error, go to the file $RELOAD_AGENT_REPORT when it is set.
set -eu
if [ -n "${RELOAD_AGENT_REPORT:-}" ]; then
	exec "${RELOAD_AGENT:-reload-agent}" inject -f - "$@" 2>"$RELOAD_AGENT_REPORT"
fi
exec "${RELOAD_AGENT:-reload-agent}" inject -f - "$@"
