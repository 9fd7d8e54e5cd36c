// Package volumes tests the API-backed pod volumes (configMap, projected
// service account token) with the engine on a real containerd and a real
// kube-apiserver (test/cluster): the agent reads them with a node's
// credentials (system:node:<name>), so the Node authorizer and
// NodeRestriction decide what it may read, as for kubelet.
package volumes
