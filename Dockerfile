# Container image of reload-agent: a scratch image holding only the
# statically linked binary (libcurl, OpenSSL, libuv, cJSON, http-parser and
# glibc inside it: no loader, no shared library), the CA bundle and a
# passwd/group/nsswitch.conf naming the unprivileged user 65532
# (scripts/rootfs.sh lays it out; docs/lean.md lists it file by file). It
# writes nothing, so it runs with a read-only root filesystem.
#
# Base images are not pulled: BASE is a Debian bookworm minbase made locally
# with debootstrap (scripts/image-test.sh shows how). Build with
#   podman build --network host --build-arg GIT_COMMIT=$(git rev-parse --short=12 HEAD) -t reload-agent .
ARG BASE=localhost/debian-minbase:bookworm

FROM ${BASE} AS build
# Everything the agent links ends up inside its binary, so the build stage
# takes Debian's security and point-release updates too (a minbase lists
# bookworm only).
RUN printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm-updates' \
      'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' '' \
      'Types: deb' 'URIs: http://deb.debian.org/debian-security' 'Suites: bookworm-security' \
      'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
      > /etc/apt/sources.list.d/updates.sources \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      build-essential lld pkg-config ca-certificates \
      libuv1-dev libcjson-dev libcurl4-openssl-dev libssl-dev libhttp-parser-dev libyaml-dev
WORKDIR /src
# libcurl and cJSON from Debian's source packages at the versions just
# installed (scripts/build-curl.sh adds the deb-src entries). A layer of its
# own: it is rebuilt only when these scripts or the packages change.
COPY scripts/debsrc.sh scripts/build-curl.sh scripts/build-cjson.sh scripts/rootfs.sh scripts/
RUN sh scripts/build-curl.sh "build/curl-$(sh scripts/build-curl.sh --version)" \
 && sh scripts/build-cjson.sh "build/cjson-$(sh scripts/build-cjson.sh --version)" \
 && rm -rf /var/lib/apt/lists/*
COPY Makefile ./
COPY scripts/link-order.txt scripts/
COPY cmd/ cmd/
COPY run/ run/
COPY watch/ watch/
COPY hash/ hash/
COPY base/ base/
COPY config/ config/
COPY net/ net/
COPY kube/ kube/
COPY actions/ actions/
COPY inject/ inject/
COPY yamldoc/ yamldoc/
COPY webhook/ webhook/
COPY sync/ sync/
ARG GIT_COMMIT=unknown
RUN make -j"$(nproc)" build/reload-agent GIT_COMMIT="${GIT_COMMIT}"

# The runtime root; the binary must run in it as it is (no loader there).
RUN sh scripts/rootfs.sh build/reload-agent /rootfs \
 && chroot --userspec=65532:65532 /rootfs /usr/local/bin/reload-agent version

FROM scratch
ARG GIT_COMMIT=unknown
LABEL org.opencontainers.image.title="reload-agent" \
      org.opencontainers.image.description="Kubernetes sidecar that reloads an app when its mounted ConfigMaps/Secrets really change" \
      org.opencontainers.image.revision="${GIT_COMMIT}"
COPY --from=build /rootfs/ /
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/reload-agent"]
CMD ["run"]
