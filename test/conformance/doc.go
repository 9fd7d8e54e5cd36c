// Package conformance compares speclet with upstream kubelet v1.34, the
// oracle of its semantics: the same scenario (a static pod manifest, edited
// or removed mid-way by steps) runs on each agent, each on its own harness
// containerd, and what GET /pods shows is sampled every second, normalized
// (Normalize) and compared under documented timing equivalences (Key,
// Compare). docs/conformance.md has the results and the differences.
//
// Contracts:
//   - An agent never shares its containerd (kubelet kills sandboxes it does
//     not know); both agents pull from one registry on 127.0.0.1 and get the
//     node name "conf", so manifests and pod names are identical.
//   - Tests talk only to 127.0.0.1 (hostNetwork pods, hooks) or to pod
//     network namespaces the harness containerd created.
//   - A scenario's steps and duration count from its anchor (Run), so a slow
//     start on a loaded machine does not shorten what is observed.
//   - Recorded kubelet results (testdata/kubelet) are what `go test ./...`
//     compares speclet with; `make conformance` rewrites them.
//
// # Usage
//
//	make conformance                 # whole corpus, kubelet built once and cached
//	go test ./test/conformance       # fast scenarios, speclet vs recorded kubelet
//	go run ./test/conformance/cmd/buildkubelet   # path of the cached kubelet
//
// In Go:
//
//	ss, _ := conformance.LoadScenarios("testdata/scenarios")
//	a, _ := conformance.StartAgent(ctx, conformance.Speclet, bin, registry, nil)
//	defer a.Stop()
//	r := conformance.Run(ctx, a, ss[0], env) // *Result: states, final, removal times
//	v := conformance.Compare(recordedKubelet, r)
package conformance
