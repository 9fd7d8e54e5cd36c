// Package volumes tests the API-backed pod volumes (configMap, secret, the
// projected service account token) end to end: speclet runs as a node of a
// real kube-apiserver (test/cluster: Node authorizer and NodeRestriction,
// so it reads them with a node's credentials, as kubelet does) on a real
// containerd (cri/harness), and the pods are created in the API.
package volumes
