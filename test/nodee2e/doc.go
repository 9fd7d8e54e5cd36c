// Package nodee2e runs Kubernetes' node e2e suite (test/e2e_node of
// k8s.io/kubernetes, its [NodeConformance] specs, built as e2e_node.test)
// against one speclet node and one kubelet node, the oracle, each joined
// to a control plane of its own (test/cluster), and compares the verdicts.
// The node serves its API on an address of a veth pair the run makes
// (NodeAddr): kube-apiserver's node proxy, through which the suite reads
// /configz, refuses loopback addresses. docs/node-e2e.md describes the run.
package nodee2e

import (
	"fmt"
	"os"
	"strings"

	nc "github.com/speclet/speclet/test/nodeconformance"
)

// Doc markers: UpdateDoc replaces what lies between them.
const (
	docBegin = "<!-- results: written by `make node-e2e`; do not edit by hand -->"
	docEnd   = "<!-- /results -->"
)

// Table renders both agents' verdicts as Markdown (nodeconformance.Table,
// with this suite's score line).
func Table(speclet, kubelet []nc.Spec, causes map[string]string, when string) string {
	return strings.Replace(nc.Table(speclet, kubelet, causes, when), "    node conformance: ", "    node e2e: ", 1)
}

// UpdateDoc replaces the results section of the Markdown file at path
// (between its markers) with table.
func UpdateDoc(path, table string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("update %s: %w", path, err)
	}
	s := string(b)
	i, j := strings.Index(s, docBegin), strings.Index(s, docEnd)
	if i < 0 || j < i {
		return fmt.Errorf("update %s: markers %q and %q not found", path, docBegin, docEnd)
	}
	s = s[:i+len(docBegin)] + "\n\n" + table + "\n" + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}
