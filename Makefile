# netpulse — build, generate, lint and test. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO          ?= go
ROOT        := $(abspath .)
BIN         := $(ROOT)/bin
TOOLS_BIN   := $(BIN)/tools
export PATH := $(TOOLS_BIN):$(PATH)

# Code generators and linters, pinned in tools/gen/go.mod. The OpenTelemetry v0.159.0 line is
# the newest whose modules all resolve from the module proxy here; controller-tools v0.20.x
# and k8s.io/code-generator v0.35.x match client-go v0.35.

OCB            := $(TOOLS_BIN)/builder
MDATAGEN       := $(TOOLS_BIN)/mdatagen
CONTROLLER_GEN := $(TOOLS_BIN)/controller-gen
STATICCHECK    := $(TOOLS_BIN)/staticcheck
CLIENT_GEN     := $(TOOLS_BIN)/client-gen
LISTER_GEN     := $(TOOLS_BIN)/lister-gen
INFORMER_GEN   := $(TOOLS_BIN)/informer-gen

KUBE_VERSION := v1.36.3
KUBE_BINS   := $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kubectl
# What `kubectl version` and /version report; a plain go build would say v0.0.0-master.
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION)
COLLECTOR   := $(BIN)/otelcol-netpulse
# The kubectl plugin (`kubectl netpulse matrix|why|top|serve`; docs/view.md).
PLUGIN      := $(BIN)/kubectl-netpulse
# Component directories with a metadata.yaml (mdatagen input).
COMPONENTS  := $(patsubst %/metadata.yaml,%,$(wildcard receiver/*/metadata.yaml processor/*/metadata.yaml exporter/*/metadata.yaml extension/*/metadata.yaml))

TEST_TIMEOUT ?= 45m
TEST_FLAGS   ?=

.PHONY: help
help: ## list targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

## ---- build -------------------------------------------------------------------------
.PHONY: build
build: ## build the otelcol-netpulse distribution and the kubectl-netpulse plugin into bin/
	$(GO) build -trimpath -o $(COLLECTOR) ./cmd/otelcol-netpulse
	$(GO) build -trimpath -o $(PLUGIN) ./cmd/kubectl-netpulse

.PHONY: kube-bins
kube-bins: $(KUBE_BINS) ## build kube-apiserver, kube-controller-manager and kubectl (Kubernetes v1.36.3) into bin/

# One go build for all three so the shared packages compile once; GOCACHE makes rebuilds cheap.
$(KUBE_BINS) &: tools/kube/go.mod tools/kube/go.sum
	@mkdir -p $(BIN)
	cd tools/kube && $(GO) build -ldflags '$(KUBE_LDFLAGS)' -o $(BIN)/ k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
	@touch $(KUBE_BINS)

## ---- real nodes --------------------------------------------------------------------
# What the real-node test cluster (testbed/realcluster) runs on each node, all built here
# from pinned sources, nothing downloaded as a binary: kubelet, kube-proxy and
# kube-scheduler (tools/kube, Kubernetes v1.36.3), containerd v2 with its runc shim and ctr,
# the CNI plugins (tools/node), CoreDNS with the DNS addon's plugins (tools/coredns), and
# Kubernetes' own pause.c compiled static, and SIG Network's kube-network-policies
# (tools/netpol), the NetworkPolicy engine the real-node suite runs on every node. The
# pause and CoreDNS images are assembled by tools/image. runc is Debian's (make deps).
REALNODE_BIN   := $(BIN)/realnode
REALNODE_KUBE  := $(REALNODE_BIN)/kubelet $(REALNODE_BIN)/kube-proxy $(REALNODE_BIN)/kube-scheduler
REALNODE_CTRD  := $(REALNODE_BIN)/containerd $(REALNODE_BIN)/containerd-shim-runc-v2 $(REALNODE_BIN)/ctr
REALNODE_CNI   := $(addprefix $(REALNODE_BIN)/cni/,bridge host-local loopback portmap)
REALNODE_NETPOL := $(REALNODE_BIN)/kube-network-policies
REALNODE_IMAGES := $(REALNODE_BIN)/images/pause.tar $(REALNODE_BIN)/images/coredns.tar
REALNODE_ARCH  := $(shell $(GO) env GOARCH)
# The netpulse image for this machine's platform only, as the nodes import it (make image
# builds both platforms for users).
REALNODE_NETPULSE_IMAGE := $(REALNODE_BIN)/images/otelcol-netpulse.tar

.PHONY: node-bins
node-bins: $(REALNODE_KUBE) $(REALNODE_CTRD) $(REALNODE_CNI) $(REALNODE_NETPOL) $(REALNODE_IMAGES) ## build what real nodes run (kubelet, kube-proxy, kube-scheduler, containerd, CNI plugins, kube-network-policies, CoreDNS, pause) into bin/realnode

$(REALNODE_KUBE) &: tools/kube/go.mod tools/kube/go.sum
	@mkdir -p $(REALNODE_BIN)
	cd tools/kube && $(GO) build -ldflags '$(KUBE_LDFLAGS)' -o $(REALNODE_BIN)/ k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler
	@touch $(REALNODE_KUBE)

# No btrfs/devmapper/zfs snapshotters (they need C headers; the nodes use overlayfs).
$(REALNODE_CTRD) &: tools/node/go.mod tools/node/go.sum
	@mkdir -p $(REALNODE_BIN)
	cd tools/node && $(GO) build -trimpath -tags 'no_btrfs no_devmapper no_zfs' -o $(REALNODE_BIN)/ github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr
	@touch $(REALNODE_CTRD)

$(REALNODE_CNI) &: tools/node/go.mod tools/node/go.sum
	@mkdir -p $(REALNODE_BIN)/cni
	cd tools/node && CGO_ENABLED=0 $(GO) build -trimpath -o $(REALNODE_BIN)/cni/ github.com/containernetworking/plugins/plugins/main/bridge github.com/containernetworking/plugins/plugins/main/loopback github.com/containernetworking/plugins/plugins/ipam/host-local github.com/containernetworking/plugins/plugins/meta/portmap
	@touch $(REALNODE_CNI)

# kube-network-policies (sigs.k8s.io/kube-network-policies, pinned in tools/netpol/go.mod)
# as a host process with a kubeconfig, like kube-proxy (tools/netpol/main.go). This kernel
# has no nft_queue, so the engine is built from a copy of its module with one change: its
# queue rules use the xtables NFQUEUE target through nft_compat (tools/netpol/nfqueue-compat.patch,
# plus tools/netpol/networkpolicy/nfqueue_compat.go), by a replace in a copy of the go.mod.
# "_": go list ./... of the main module never enters it.
NETPOL_BUILD := $(BIN)/_netpol-build
$(REALNODE_NETPOL): tools/netpol/go.mod tools/netpol/go.sum tools/netpol/main.go tools/netpol/nfqueue-compat.patch tools/netpol/networkpolicy/nfqueue_compat.go
	@mkdir -p $(REALNODE_BIN)
	rm -rf $(NETPOL_BUILD) && mkdir -p $(NETPOL_BUILD)
	cd tools/netpol && cp -r $$($(GO) list -m -f '{{.Dir}}' sigs.k8s.io/kube-network-policies) $(NETPOL_BUILD)/kube-network-policies && \
	  chmod -R u+w $(NETPOL_BUILD)/kube-network-policies && \
	  patch --quiet -d $(NETPOL_BUILD)/kube-network-policies -p1 < nfqueue-compat.patch && \
	  cp networkpolicy/nfqueue_compat.go $(NETPOL_BUILD)/kube-network-policies/pkg/networkpolicy/ && \
	  cp go.mod go.sum $(NETPOL_BUILD)/ && \
	  $(GO) mod edit -modfile=$(NETPOL_BUILD)/go.mod -replace sigs.k8s.io/kube-network-policies=$(NETPOL_BUILD)/kube-network-policies && \
	  CGO_ENABLED=0 $(GO) build -modfile=$(NETPOL_BUILD)/go.mod -trimpath -o $(REALNODE_NETPOL) .

$(REALNODE_BIN)/coredns: tools/coredns/go.mod tools/coredns/go.sum tools/coredns/main.go
	@mkdir -p $(REALNODE_BIN)
	cd tools/coredns && CGO_ENABLED=0 $(GO) build -trimpath -o $(REALNODE_BIN)/coredns .

# Kubernetes' pause (build/pause/linux/pause.c of the pinned k8s.io/kubernetes module),
# static, as its own Makefile builds it.
$(REALNODE_BIN)/pause: tools/kube/go.mod
	@mkdir -p $(REALNODE_BIN)
	src=$$(cd tools/kube && $(GO) list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c && \
	  gcc -Os -Wall -Werror -static -DVERSION=v3.10.2-netpulse -o $@ $$src

$(REALNODE_BIN)/images/pause.tar: $(REALNODE_BIN)/pause tools/image/helper.go
	cd tools/image && GO=$(GO) $(GO) run . helper -bin $(REALNODE_BIN)/pause -ref registry.k8s.io/pause:3.10.2 -entrypoint /pause -user 65535 -platform linux/$(REALNODE_ARCH) -o $@

# CoreDNS runs as root in its image so that it can bind port 53 (the upstream image gives
# the binary a file capability instead; this image builder writes no extended attributes).
$(REALNODE_BIN)/images/coredns.tar: $(REALNODE_BIN)/coredns tools/image/helper.go
	cd tools/image && GO=$(GO) $(GO) run . helper -bin $(REALNODE_BIN)/coredns -ref registry.k8s.io/coredns/coredns:v1.15.0 -entrypoint /coredns -user 0 -platform linux/$(REALNODE_ARCH) -o $@

.PHONY: node-image
node-image: ## the netpulse image for this machine's platform, as real nodes import it (bin/realnode/images/otelcol-netpulse.tar)
	cd tools/image && GO=$(GO) $(GO) run . build -root $(ROOT) -platforms linux/$(REALNODE_ARCH) -o $(REALNODE_NETPULSE_IMAGE)

## ---- helm --------------------------------------------------------------------------
# Helm, pinned in tools/helm/go.mod (its own module, like tools/kube) and built from source;
# the version is stamped so `bin/helm version` reports it. The chart is deploy/helm/netpulse
# (docs/helm.md); testbed/helmtest tests it with this binary.
HELM         := $(BIN)/helm
HELM_VERSION := $(shell awk '$$1 == "helm.sh/helm/v4" {print $$2}' tools/helm/go.mod)

.PHONY: helm
helm: $(HELM) ## build Helm (version pinned in tools/helm/go.mod) into bin/helm

$(HELM): tools/helm/go.mod tools/helm/go.sum
	@mkdir -p $(BIN)
	cd tools/helm && $(GO) build -trimpath -ldflags '-X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)' -o $(HELM) helm.sh/helm/v4/cmd/helm

.PHONY: test-helm
test-helm: kube-bins build helm ## the Helm chart's tests only: lint, template, schema, kustomize parity, install/upgrade/uninstall on a real kube-apiserver
	NETPULSE_KUBE_NO_BUILD=1 NETPULSE_COLLECTOR=$(COLLECTOR) $(GO) test -count=1 ./testbed/helmtest/

## ---- image -------------------------------------------------------------------------
# The container image without a Docker daemon: tools/image (its own Go module, so
# go-containerregistry stays out of go.mod) builds static binaries and writes one archive,
# an OCI image layout with a docker manifest.json, for `docker load`, `kind load
# image-archive` and `ctr images import` (docs/image.md). Reproducible: the same sources
# give the same digest; SOURCE_DATE_EPOCH (default 0) is the only time in it.
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_ARCHIVE   ?= $(BIN)/otelcol-netpulse-image.tar

.PHONY: image
image: ## build the image (linux/amd64 + linux/arm64) as bin/otelcol-netpulse-image.tar; no Docker needed
	cd tools/image && GO=$(GO) $(GO) run . build -root $(ROOT) -platforms $(IMAGE_PLATFORMS) -o $(IMAGE_ARCHIVE)

# No -race here: the tool runs in one goroutine, and the race detector makes gzip of the
# binary 7x slower (83 s instead of 13 s with a warm build cache).
.PHONY: test-image
test-image: ## the image's tests: reproducible, runs as 65532 on a read-only root (root), versions agree
	cd tools/image && GO=$(GO) $(GO) test -count=1 -timeout 30m ./...

## ---- tools -------------------------------------------------------------------------
# Versions are pinned in tools/gen/go.mod (ocb and mdatagen v0.159.0, controller-tools
# v0.20.1, code-generator v0.35.4, staticcheck v0.8.2) and built from that module.
TOOL_PKGS := go.opentelemetry.io/collector/cmd/builder go.opentelemetry.io/collector/cmd/mdatagen \
  sigs.k8s.io/controller-tools/cmd/controller-gen honnef.co/go/tools/cmd/staticcheck \
  k8s.io/code-generator/cmd/client-gen k8s.io/code-generator/cmd/lister-gen k8s.io/code-generator/cmd/informer-gen
TOOLS := $(OCB) $(MDATAGEN) $(CONTROLLER_GEN) $(STATICCHECK) $(CLIENT_GEN) $(LISTER_GEN) $(INFORMER_GEN)

.PHONY: tools
tools: $(TOOLS) ## build the pinned code generators and linters into bin/tools

$(TOOLS) &: tools/gen/go.mod tools/gen/go.sum
	@mkdir -p $(TOOLS_BIN)
	cd tools/gen && $(GO) build -o $(TOOLS_BIN)/ $(TOOL_PKGS)
	@touch $(TOOLS)

## ---- generate ----------------------------------------------------------------------
.PHONY: generate
generate: generate-api generate-metadata generate-distribution generate-helm ## regenerate all generated code (CRDs, deepcopy, mdatagen, ocb, the Helm chart's copies)

# The PodNetworkHealth API (api/v1alpha1): controller-gen writes the deepcopy functions and the
# CRD (deploy/crds, with the boilerplate as a YAML comment); code-generator writes the typed
# clientset, listers and informers into api/client/{clientset,listers,informers}, which are
# wholly generated and recreated; the typed client covers OpenShift's PodNetworkConnectivityCheck
# (api/openshift/...) too.
API_MODULE := github.com/netpulse/netpulse
API_PKG    := $(API_MODULE)/api
API_HEADER := hack/boilerplate.go.txt
.PHONY: generate-api
generate-api: $(CONTROLLER_GEN) $(CLIENT_GEN) $(LISTER_GEN) $(INFORMER_GEN) ## regenerate the PodNetworkHealth API: deepcopy, CRD, typed client
	$(CONTROLLER_GEN) object:headerFile=$(API_HEADER) paths=./api/v1alpha1
	@mkdir -p $(TOOLS_BIN) && grep -v -e '^/\*' -e '^\*/' $(API_HEADER) | sed -e 's/^/# /' -e 's/ *$$//' > $(TOOLS_BIN)/boilerplate.yaml.txt
	$(CONTROLLER_GEN) crd:crdVersions=v1,headerFile=$(TOOLS_BIN)/boilerplate.yaml.txt paths=./api/v1alpha1 output:crd:artifacts:config=deploy/crds
	# OpenShift's PodNetworkConnectivityCheck, written from its published schema
	# (api/openshift/operatorcontrolplane/v1alpha1/doc.go): deepcopy, and its CRD for the
	# tests and for clusters without OpenShift (OpenShift ships its own).
	$(CONTROLLER_GEN) object:headerFile=$(API_HEADER) paths=./api/openshift/operatorcontrolplane/v1alpha1
	$(CONTROLLER_GEN) crd:crdVersions=v1,headerFile=$(TOOLS_BIN)/boilerplate.yaml.txt paths=./api/openshift/operatorcontrolplane/v1alpha1 output:crd:artifacts:config=testdata/crds
	rm -rf api/client/clientset api/client/listers api/client/informers
	$(CLIENT_GEN) --go-header-file $(API_HEADER) --input-base $(API_MODULE) --input api/v1alpha1 \
	  --input api/openshift/operatorcontrolplane/v1alpha1 \
	  --clientset-name versioned --output-pkg $(API_PKG)/client/clientset --output-dir api/client/clientset
	$(LISTER_GEN) --go-header-file $(API_HEADER) --output-pkg $(API_PKG)/client/listers --output-dir api/client/listers \
	  $(API_PKG)/v1alpha1 $(API_PKG)/openshift/operatorcontrolplane/v1alpha1
	$(INFORMER_GEN) --go-header-file $(API_HEADER) --output-pkg $(API_PKG)/client/informers --output-dir api/client/informers \
	  --versioned-clientset-package $(API_PKG)/client/clientset/versioned --listers-package $(API_PKG)/client/listers \
	  $(API_PKG)/v1alpha1 $(API_PKG)/openshift/operatorcontrolplane/v1alpha1

.PHONY: generate-metadata
generate-metadata: $(MDATAGEN)
	@for c in $(COMPONENTS); do echo "mdatagen $$c"; (cd $$c && $(MDATAGEN) metadata.yaml) || exit 1; done
	@# mdatagen links only the OpenTelemetry project's distributions; ours is builder-config.yaml.
	@for c in $(COMPONENTS); do sed -i 's|^\[netpulse\]: *$$|[netpulse]: ../../builder-config.yaml|' $$c/README.md; done

# ocb writes a whole module (go.mod included) into a scratch dir; only its Go sources are
# kept, as a package of this module, so there is one go.mod and `go build ./...` needs no ocb.
.PHONY: generate-distribution
generate-distribution: $(OCB)
	rm -rf _build && mkdir -p _build
	$(OCB) --config builder-config.yaml --skip-compilation --skip-get-modules
	rm -f cmd/otelcol-netpulse/*.go
	cp _build/otelcol-netpulse/*.go cmd/otelcol-netpulse/
	gofmt -w cmd/otelcol-netpulse
	rm -rf _build

# The Helm chart's copies of deploy/ (collector configurations, CRD, alert rules,
# dashboard), its version (builder-config.yaml's dist.version) and the values table of
# docs/helm.md (from values.yaml's comments). Last in `generate`: after generate-api, which
# writes deploy/crds.
.PHONY: generate-helm
generate-helm: ## regenerate the Helm chart's copies of deploy/, its version and docs/helm.md's values table
	$(GO) run ./testbed/helmtest/chartgen

.PHONY: check-generated
check-generated: generate ## fail when committed generated code differs from what the generators produce
	@if [ -n "$$(git status --porcelain -- cmd/otelcol-netpulse api deploy/crds deploy/helm docs/helm.md receiver processor exporter extension)" ]; then \
	  echo "generated code is out of date; run 'make generate' and commit:"; \
	  git status --porcelain -- cmd/otelcol-netpulse api deploy/crds deploy/helm docs/helm.md receiver processor exporter extension; \
	  git --no-pager diff --stat; exit 1; \
	fi
	@echo "generated code is up to date"

## ---- quality -----------------------------------------------------------------------
.PHONY: lint
lint: $(STATICCHECK) ## gofmt + licence headers + import rule + docs checked against the tree + the package map + the function budget + go vet + staticcheck (pinned)
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt -w needed:"; echo "$$unformatted"; exit 1; fi
	@./hack/spdx.sh
	@GO=$(GO) $(GO) run ./hack/importcheck
	@# Every relative link and anchor, metric name, chart value, make target and repo path
	@# the *.md files name exists (hack/doccheck).
	@GO=$(GO) $(GO) run ./hack/doccheck
	@# Every package of `go list ./...` has its line in docs/development.md's package map
	@# (hack/pkgmap).
	@GO=$(GO) $(GO) run ./hack/pkgmap
	@# Every hand-written function within 100 lines, harness code included (hack/funclen).
	@$(GO) run ./hack/funclen
	$(GO) vet ./...
	$(STATICCHECK) ./...

.PHONY: deps
deps: ## install the Debian packages tests and demo need (etcd-server, iproute2, nftables, iputils-ping, prometheus, chromium) when missing
	@./hack/deps.sh

.PHONY: test
# The e2e package runs three times: a 4-node full mesh (every scenario but TestSampled* and
# TestSharded*) on deploy/'s collector configuration, then a 16-node, 3-zone cluster where
# probing is sampled (TestSampled*) on the configuration the Helm chart renders
# (NETPULSE_E2E_CONFIG=chart), then an 8-node cluster with the gateway as the chart's
# gateway.shards=2 renders it, two shards (TestSharded*).
E2E_SAMPLED_NODES ?= 16
E2E_SHARDED_NODES ?= 8

test: deps kube-bins build helm node-bins node-image ## unit + integration + e2e tests (4-node mesh, 16-node sampled, then the chart and image on 3 real nodes), race detector on (needs root)
	$(MAKE) --no-print-directory sweep
	NETPULSE_KUBE_NO_BUILD=1 NETPULSE_COLLECTOR=$(COLLECTOR) $(GO) test -race -timeout $(TEST_TIMEOUT) -count=1 $(TEST_FLAGS) -skip '^(TestSampled|TestSharded|TestRealNodes)' ./...
	NETPULSE_KUBE_NO_BUILD=1 NETPULSE_COLLECTOR=$(COLLECTOR) NETPULSE_E2E_NODES=$(E2E_SAMPLED_NODES) NETPULSE_E2E_CONFIG=chart $(GO) test -race -timeout $(TEST_TIMEOUT) -count=1 $(TEST_FLAGS) -run '^TestSampled' ./testbed/e2e/
	NETPULSE_KUBE_NO_BUILD=1 NETPULSE_COLLECTOR=$(COLLECTOR) NETPULSE_E2E_NODES=$(E2E_SHARDED_NODES) NETPULSE_E2E_CONFIG=chart NETPULSE_E2E_SHARDS=2 $(GO) test -race -timeout $(TEST_TIMEOUT) -count=1 $(TEST_FLAGS) -run '^TestSharded' ./testbed/e2e/
	$(MAKE) --no-print-directory test-real
	$(MAKE) --no-print-directory test-image

# The longer gray scenarios on a 4-node mesh of their own (testbed/e2e TestHalfLoss,
# TestCongestedNode, TestSmallLoss, TestSlowNode), not in make test (testbed/e2e grayEnv
# says why): ~6 minutes.
.PHONY: test-gray
test-gray: kube-bins build ## the gray scenarios of a node losing half or 2 % of its input, a congested node, a node answering 50 ms late and a slow link between zones, on a 4-node mesh of their own, not in make test (root)
	NETPULSE_KUBE_NO_BUILD=1 NETPULSE_COLLECTOR=$(COLLECTOR) NETPULSE_E2E_GRAY=1 $(GO) test -race -timeout $(TEST_TIMEOUT) -count=1 -v $(TEST_FLAGS) -run '^(TestHalfLoss|TestCongestedNode|TestSmallLoss|TestSlowNode|TestSlowZoneLink)$$' ./testbed/e2e/

.PHONY: test-gray-long
test-gray-long: kube-bins build ## the gray judgement's false positives end to end: every node of a 4-node mesh losing 0.1 % of its input for 30 minutes (NETPULSE_E2E_BACKGROUND shortens it; root)
	NETPULSE_KUBE_NO_BUILD=1 NETPULSE_COLLECTOR=$(COLLECTOR) NETPULSE_E2E_GRAY_LONG=1 $(GO) test -race -timeout 60m -count=1 -v $(TEST_FLAGS) -run '^TestBackgroundLoss$$' ./testbed/e2e/

# The real-node suite alone (testbed/e2ereal): netpulse installed with its Helm chart and
# image on 3 real nodes (testbed/realcluster). No -race: the binaries under test are the
# image's, built without it; the race detector would only slow the harness.
.PHONY: test-real
test-real: kube-bins build helm node-bins node-image ## the Helm chart and image on a local cluster of 3 real nodes (kubelet, containerd, CNI, kube-proxy, CoreDNS): install, partition, upgrade, takeover, matrix, footprint, uninstall (root)
	NETPULSE_KUBE_NO_BUILD=1 $(GO) test -timeout 20m -count=1 -v $(TEST_FLAGS) -run '^TestRealNodes$$' ./testbed/e2ereal/ 2>&1 | tee $(BIN)/test-real.log | grep -E '^(=== RUN|--- |    --- |PASS|FAIL|ok |panic)|figure:|Error|realnodes_test.go' ; exit $${PIPESTATUS[0]}

.PHONY: sweep
sweep: ## remove what crashed or interrupted runs left (real-node cgroups and mounts, namespaces and bridges of any prefix, orphaned control-plane dirs); a no-op while a cluster runs (root)
	$(GO) run ./hack/sweep

.PHONY: test-short
test-short: ## unit tests only (no control plane, no network namespaces)
	$(GO) test -race -short ./...

.PHONY: bench
bench: ## benchmarks against their references; one line per comparison: name, ours, reference, ratio
	@./hack/bench.sh

.PHONY: demo
demo: deps kube-bins build $(if $(filter 1,$(DEMO_REAL)),helm node-bins node-image) ## the scripted end-to-end demo: simulated cluster, agents, gateway, partition, recovery (root; DEMO_DURATION=10m keeps it up; DEMO_REAL=1 on real nodes with the Helm chart)
	GO=$(GO) ./hack/demo.sh

.PHONY: clean
clean:
	rm -rf _build $(COLLECTOR) $(PLUGIN) $(IMAGE_ARCHIVE)
