// Package cri is speclet's boundary with container runtimes: narrow interfaces
// over the CRI (k8s.io/cri-api), a gRPC client for unix sockets, error classes
// decided once here, a Prometheus metrics decorator, and a simulated runtime.
//
// Nothing in this package imports the rest of speclet.
package cri
