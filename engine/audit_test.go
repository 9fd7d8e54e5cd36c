package engine

import (
	"flag"
	"os"
	"testing"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/internal/suite"
)

// The two checks every engine test feeds (doc.go, # Tests) live in
// engine/internal/suite, shared with the tests on a real containerd
// (engine/containerdtest): the CRI audit of each test's runtime
// (auditRuntime) and the row coverage of the steps the engine's machines
// take (coverStep, its Config.Steps). When the whole package ran, TestMain
// records what this package's tests took and called and, once every part
// of the suite has recorded (make unit), prints the table of the union and
// fails when a row or branch was never taken or the audit found a
// violation or a declared method never called.

func TestMain(m *testing.M) {
	if dir := os.Getenv(simProcessEnv); dir != "" {
		serveSimProcess(dir) // benchsim_test.go
		return
	}
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		registerEffects() // effects_test.go
	}
	code := suite.Run(m, "engine")
	if !suiteEffects(os.Stdout, suite.WholePackage() || testing.Verbose()) && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// audited is a client whose calls a recorder records.
type audited = suite.Audited

// auditRuntime dials the runtime at endpoint (with opts) through a
// recorder (suite.Runtime): when t ends, t fails on the violations of its
// records, which the suite's audit adds to the package's.
func auditRuntime(t testing.TB, endpoint string, opts ...cri.Option) audited {
	return suite.Runtime(t, endpoint, opts...)
}

// coverStep counts the row and choice branches of a step in the suite's
// row coverage: the Config.Steps of every engine the scripts run.
func coverStep(s Step) { suite.Took(s.Machine, s.Row, s.Choices) }
