// Package gen turns a validated spec (package spec) into the files specgen
// writes: Go source of the state machines over looplab/fsm, the routes from
// channel inputs to machine events, a test that fails when the spec changed
// after generation, and DOT and Mermaid state graphs. Every function is pure:
// it returns bytes (Go source already gofmt'ed), the same bytes for the same
// spec.
//
// Usage:
//
//	s, diags := spec.Parse(spec.Embedded())
//	if diags.HasErrors() { ... }
//	files, err := gen.Files(s) // "fsm/pod_gen.go" -> source, "docs/states/pod.dot" -> graph, ...
//
// The Go templates are machine.go.tmpl, routes.go.tmpl and stale_test.go.tmpl;
// golden copies of their output for spec/testdata/valid/door.hcl live in
// testdata/door (go test ./gen -update rewrites them).
package gen
