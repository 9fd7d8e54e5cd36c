// Package cri is speclet's boundary with container runtimes: narrow interfaces
// over the CRI (k8s.io/cri-api), a gRPC client for unix sockets, error classes
// decided once here, Prometheus metrics of every call (a gRPC interceptor,
// WithMetrics; WithInterceptors adds others, as the CRI audit's), and (in
// cri/sim) a simulated runtime served over real gRPC.
//
// Nothing in this package imports the rest of speclet.
//
// # Errors
//
// Every error the client returns is an *Error naming the endpoint, the CRI
// call and the object it was about, with a Class the engine acts on:
//
//	cri unix:///run/containerd/containerd.sock: StartContainer "4f1c…": not found: ...
//
// ClassNotFound (id unknown: already removed), ClassUnavailable (wrong socket
// path, runtime down), ClassDeadlineExceeded (the call outlived its deadline),
// ClassImageNotFound (PullImage of a reference the registry lacks),
// ClassUnimplemented (e.g. GetContainerEvents on containerd 1.6), ClassOther.
// Use ClassOf or the Is* helpers; never inspect gRPC codes above this package.
// Removing an unknown sandbox or container succeeds (containerd and the
// simulated runtime agree), so removal is idempotent.
//
// # Usage
//
//	rt, err := cri.Dial(ctx, "unix:///run/containerd/containerd.sock",
//		cri.WithTimeout(2*time.Minute),             // per call; PullImage: WithPullTimeout, default none
//		cri.WithMetrics(prometheus.DefaultRegisterer)) // every call's duration and errors
//	if err != nil { ... }               // only a malformed endpoint fails here
//	defer rt.Close()                    // rt is a cri.Full, for every caller
//	if _, err := rt.Version(ctx); cri.IsUnavailable(err) { ... } // runtime not up yet
//	ref, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox:latest"}, nil, nil)
//	if cri.IsImageNotFound(err) { ... } // ErrImagePull, back off
//
// The same suite of contract tests (contract_test.go) runs against real
// containerd and the simulated runtime: go test ./cri/... -run Contract -v.
package cri
