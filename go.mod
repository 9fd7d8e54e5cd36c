module github.com/speclet/speclet

go 1.26.8

require (
	github.com/cockroachdb/datadriven v1.0.2
	github.com/distribution/reference v0.6.0
	github.com/google/go-containerregistry v0.20.6
	github.com/hashicorp/hcl/v2 v2.24.0
	github.com/looplab/fsm v1.0.3
	github.com/prometheus/client_golang v1.25.0
	github.com/prometheus/client_model v0.6.3
	github.com/zclconf/go-cty v1.20.0
	golang.org/x/sys v0.48.0
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
	k8s.io/api v0.34.13
	k8s.io/apimachinery v0.34.13
	k8s.io/client-go v0.34.13
	k8s.io/component-helpers v0.34.4
	k8s.io/cri-api v0.34.13
	k8s.io/kubelet v0.34.13
	k8s.io/kubernetes v1.34.4
	k8s.io/utils v0.0.0-20250604170112-4c0f3b243397
	sigs.k8s.io/json v0.0.0-20241014173422-cfa47c3a1cc8
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/blang/semver/v4 v4.0.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/cobra v1.9.1 // indirect
	go.opentelemetry.io/otel v1.45.0 // indirect
	go.opentelemetry.io/otel/trace v1.45.0 // indirect
	k8s.io/apiextensions-apiserver v0.0.0 // indirect
	k8s.io/apiserver v0.34.13 // indirect
	k8s.io/component-base v0.34.13 // indirect
	k8s.io/controller-manager v0.0.0 // indirect
)

require (
	github.com/agext/levenshtein v1.2.1 // indirect
	github.com/apparentlymart/go-textseg/v15 v15.0.0 // indirect
	github.com/apparentlymart/go-textseg/v17 v17.0.1 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/containerd/stargz-snapshotter/estargz v0.16.3 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/docker/cli v28.2.2+incompatible // indirect
	github.com/docker/distribution v2.8.3+incompatible // indirect
	github.com/docker/docker-credential-helpers v0.9.3 // indirect
	github.com/emicklei/go-restful/v3 v3.12.2 // indirect
	github.com/fxamacker/cbor/v2 v2.9.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-openapi/jsonpointer v0.21.0 // indirect
	github.com/go-openapi/jsonreference v0.20.2 // indirect
	github.com/go-openapi/swag v0.23.0 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/google/gnostic-models v0.7.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/gorilla/websocket v1.5.4-0.20250319132907-e064f32e3674 // indirect
	github.com/josharian/intern v1.0.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/klauspost/compress v1.20.1 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/mailru/easyjson v0.7.7 // indirect
	github.com/mitchellh/go-homedir v1.1.0 // indirect
	github.com/mitchellh/go-wordwrap v1.0.1 // indirect
	github.com/moby/spdystream v0.5.1 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.3-0.20250322232337-35a7c28c31ee // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/mxk/go-flowrate v0.0.0-20140419014527-cca7078d478f // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/prometheus/common v0.72.0
	github.com/prometheus/procfs v0.22.0
	github.com/sirupsen/logrus v1.9.3 // indirect
	github.com/spf13/pflag v1.0.6 // indirect
	github.com/vbatts/tar-split v0.12.1 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/oauth2 v0.37.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/term v0.46.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	golang.org/x/time v0.9.0
	golang.org/x/tools v0.49.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	gopkg.in/evanphx/json-patch.v4 v4.12.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	k8s.io/klog/v2 v2.130.1 // indirect
	k8s.io/kube-openapi v0.0.0-20250710124328-f3f2b991d03b // indirect
	sigs.k8s.io/randfill v1.0.0 // indirect
	sigs.k8s.io/structured-merge-diff/v6 v6.3.0 // indirect
)

// k8s.io/kubernetes (engine/staticuid: kubelet's static pod UID) requires its
// staging modules at v0.0.0: each is pinned to the version speclet selects
// anyway, the others to v0.34.4, the one k8s.io/kubernetes v1.34.4 is built with.
replace (
	k8s.io/api => k8s.io/api v0.34.13
	k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.34.4
	k8s.io/apimachinery => k8s.io/apimachinery v0.34.13
	k8s.io/apiserver => k8s.io/apiserver v0.34.13
	k8s.io/cli-runtime => k8s.io/cli-runtime v0.34.4
	k8s.io/client-go => k8s.io/client-go v0.34.13
	k8s.io/cloud-provider => k8s.io/cloud-provider v0.34.4
	k8s.io/cluster-bootstrap => k8s.io/cluster-bootstrap v0.34.4
	k8s.io/code-generator => k8s.io/code-generator v0.34.4
	k8s.io/component-base => k8s.io/component-base v0.34.13
	k8s.io/component-helpers => k8s.io/component-helpers v0.34.4
	k8s.io/controller-manager => k8s.io/controller-manager v0.34.4
	k8s.io/cri-api => k8s.io/cri-api v0.34.13
	k8s.io/cri-client => k8s.io/cri-client v0.34.4
	k8s.io/csi-translation-lib => k8s.io/csi-translation-lib v0.34.4
	k8s.io/dynamic-resource-allocation => k8s.io/dynamic-resource-allocation v0.34.4
	k8s.io/endpointslice => k8s.io/endpointslice v0.34.4
	k8s.io/externaljwt => k8s.io/externaljwt v0.34.4
	k8s.io/kms => k8s.io/kms v0.34.4
	k8s.io/kube-aggregator => k8s.io/kube-aggregator v0.34.4
	k8s.io/kube-controller-manager => k8s.io/kube-controller-manager v0.34.4
	k8s.io/kube-proxy => k8s.io/kube-proxy v0.34.4
	k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.34.4
	k8s.io/kubectl => k8s.io/kubectl v0.34.4
	k8s.io/kubelet => k8s.io/kubelet v0.34.13
	k8s.io/metrics => k8s.io/metrics v0.34.4
	k8s.io/mount-utils => k8s.io/mount-utils v0.34.4
	k8s.io/pod-security-admission => k8s.io/pod-security-admission v0.34.4
	k8s.io/sample-apiserver => k8s.io/sample-apiserver v0.34.4
	k8s.io/sample-cli-plugin => k8s.io/sample-cli-plugin v0.34.4
	k8s.io/sample-controller => k8s.io/sample-controller v0.34.4
)
