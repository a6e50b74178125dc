# syntax=docker/dockerfile:1
# The otelcol-netpulse image, for those with Docker (BuildKit):
#
#   docker build -t ghcr.io/netpulse/otelcol-netpulse:0.1.0 .          # this machine's platform
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     -t <registry>/otelcol-netpulse:0.1.0 --push .                     # both, to a registry
#
# (the tag is builder-config.yaml's dist.version, as in deploy/agent-gateway/kustomization.yaml)
#
# `make image` builds the same image without a Docker daemon, reproducibly, as an OCI
# archive (docs/image.md). Both go through tools/image, so the binary's build flags and the
# image's files are written in one place: a static binary (CGO_ENABLED=0 -trimpath
# -buildvcs=false -ldflags='-s -w'), /etc/passwd and /etc/group, /etc/nsswitch.conf, the
# Mozilla CA roots and /tmp. No shell, no package manager, nothing else; every file is
# owned by root and the process runs as 65532:65532.

# The build runs on the builder's own platform and cross-compiles (no emulation).
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
ENV GOTOOLCHAIN=local
WORKDIR /src
COPY go.mod go.sum ./
COPY tools/image/go.mod tools/image/go.sum tools/image/
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download && cd tools/image && go mod download
COPY . .
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    cd tools/image && go run . rootfs -root /src -platform "$TARGETOS/$TARGETARCH" -o /rootfs

FROM scratch
# The version is builder-config.yaml's dist.version (tools/image's tests check this default
# and these labels against it and against the labels `make image` writes).
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="otelcol-netpulse" \
      org.opencontainers.image.description="netpulse - Kubernetes pod-network health, as an OpenTelemetry Collector distribution" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/netpulse/netpulse"
COPY --from=build /rootfs/ /
USER 65532:65532
ENTRYPOINT ["/otelcol-netpulse"]
