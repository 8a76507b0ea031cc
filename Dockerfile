# Container image of reload-agent: a scratch image holding only the binary,
# the shared libraries it links (as ldd lists them), libcurl and its
# libraries (loaded on first use by net/curl_dl.c), the dynamic loader, the
# CA bundle and a passwd/group naming the unprivileged user 65532. It writes
# nothing, so it runs with a read-only root filesystem.
#
# Base images are not pulled: BASE is a Debian bookworm minbase made locally
# with debootstrap (scripts/image-test.sh shows how). Build with
#   podman build --network host --build-arg GIT_COMMIT=$(git rev-parse --short=12 HEAD) -t reload-agent .
ARG BASE=localhost/debian-minbase:bookworm

FROM ${BASE} AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      build-essential pkg-config ca-certificates \
      libuv1-dev libcjson-dev libcurl4-openssl-dev libssl-dev libhttp-parser-dev libyaml-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile ./
COPY agent/ agent/
COPY watch/ watch/
COPY hash/ hash/
COPY base/ base/
COPY config/ config/
COPY net/ net/
COPY kube/ kube/
COPY actions/ actions/
COPY inject/ inject/
COPY webhook/ webhook/
ARG GIT_COMMIT=unknown
RUN make -j"$(nproc)" build/reload-agent GIT_COMMIT="${GIT_COMMIT}"

# The runtime root. Libraries keep the path ldd resolves them to (/lib/...,
# where Debian's loader searches without an ld.so.cache); cp -L copies the
# file a versioned symlink points to under the symlink's name.
RUN set -eu; R=/rootfs; \
    install -D -m 0755 build/reload-agent "$R/usr/local/bin/reload-agent"; \
    strip --strip-unneeded "$R/usr/local/bin/reload-agent"; \
    MA=$(gcc -print-multiarch); CURL=/usr/lib/$MA/libcurl.so.4; \
    for lib in $CURL $(ldd build/reload-agent "$CURL" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $1 !~ /:$/ { print $1 }' | sort -u); do \
      mkdir -p "$R$(dirname "$lib")"; cp -L "$lib" "$R$lib"; \
    done; \
    test -e "$R/lib64/ld-linux-x86-64.so.2"; \
    chroot "$R" /lib64/ld-linux-x86-64.so.2 --list "$CURL" > /dev/null; \
    install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$R/etc/ssl/certs/ca-certificates.crt"; \
    printf 'root:x:0:0:root:/:/sbin/nologin\nreload-agent:x:65532:65532:reload-agent:/nonexistent:/sbin/nologin\n' > "$R/etc/passwd"; \
    printf 'root:x:0:\nreload-agent:x:65532:\n' > "$R/etc/group"; \
    printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$R/etc/nsswitch.conf"; \
    chroot "$R" /usr/local/bin/reload-agent version

FROM scratch
ARG GIT_COMMIT=unknown
LABEL org.opencontainers.image.title="reload-agent" \
      org.opencontainers.image.description="Kubernetes sidecar that reloads an app when its mounted ConfigMaps/Secrets really change" \
      org.opencontainers.image.revision="${GIT_COMMIT}"
COPY --from=build /rootfs/ /
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/reload-agent"]
CMD ["run"]
