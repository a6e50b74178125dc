// Module image builds the otelcol-netpulse container image (an OCI archive for linux/amd64
// and linux/arm64) without a Docker daemon: `make image`, docs/image.md. It is kept out of
// the main go.mod so that go-containerregistry is not a dependency of the distribution.
module github.com/netpulse/netpulse/tools/image

go 1.26.0

require (
	github.com/google/go-containerregistry v0.22.1
	golang.org/x/crypto/x509roots/fallback v0.0.0-20261030153154-30a33513ff6d
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
