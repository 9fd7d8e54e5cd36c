package nodee2e

import "github.com/speclet/speclet/test/cluster"

// NodeAddr is the address the node serves its API on: a cluster.HostAddr
// (the host end of a veth pair the run makes), which kube-apiserver's node
// proxy accepts where it refuses loopback addresses.
type NodeAddr = cluster.HostAddr

// NewNodeAddr makes the node's address (cluster.NewHostAddr); Remove undoes
// it.
func NewNodeAddr() (*NodeAddr, error) { return cluster.NewHostAddr("ne2e") }
