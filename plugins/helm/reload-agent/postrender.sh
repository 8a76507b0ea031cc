#!/bin/sh
# postrender.sh - the command of reload-agent's Helm post-renderer plugin
# (plugin.yaml, docs/render-plugins.md): the rendered manifests on stdin,
# `reload-agent inject` of them on stdout, its report on stderr. All or
# nothing: on any error inject writes nothing and exits non-zero, and Helm
# stops. The arguments (--post-renderer-args) go to inject.
set -eu
exec "${RELOAD_AGENT:-reload-agent}" inject -f - "$@"
