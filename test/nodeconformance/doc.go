// Package nodeconformance runs the [NodeConformance] specs of Kubernetes'
// own e2e suite (test/e2e/common/node and test/e2e/common/storage of
// k8s.io/kubernetes) against speclet nodes and, as the oracle, kubelet
// nodes, each under the control plane of test/cluster.
package nodeconformance
