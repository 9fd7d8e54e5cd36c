// Package spec owns the lifecycle spec of speclet: the HCL files in this
// directory (pod.hcl, container.hcl, routes.hcl) and the Go package that
// decodes and validates them.
//
// A machine file declares one state machine: its events, guards (questions the
// engine answers), actions (effects the engine runs, each naming the CRI calls
// it makes), durations (timer lengths the engine supplies) and states with
// their transitions, timers and choices. routes.hcl maps the engine's channel
// inputs to machine events. See State for the transition semantics.
//
// Validation reports every problem as an HCL diagnostic with file:line:col:
// syntax errors, unknown references with a suggestion, duplicate or invalid
// names, unreachable states, dead ends, final states with exits, ambiguous or
// shadowed transitions, choices without otherwise, timers without a
// transition, and CRI calls that k8s.io/cri-api does not define.
//
// Usage:
//
//	s, diags := spec.Parse(spec.Embedded())
//	if diags.HasErrors() {
//		s.WriteDiagnostics(os.Stderr, diags)
//	}
//
// The package imports HCL only; the list of CRI method names is generated
// from k8s.io/cri-api (crimethods_gen.go) and checked by a test.
package spec

//go:generate go run ../cmd/specgen -cri-methods crimethods_gen.go
