// Package speclet pins the modules the packages of this repository build on,
// so that they are required in go.mod before the code that uses them lands.

//go:build deps

package speclet

import (
	_ "github.com/cockroachdb/datadriven"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/hashicorp/hcl/v2/hclsimple"
	_ "github.com/looplab/fsm"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/zclconf/go-cty/cty"
	_ "google.golang.org/grpc"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/cri-api/pkg/apis/runtime/v1"
	_ "k8s.io/utils/clock/testing"
	_ "sigs.k8s.io/yaml"
)
