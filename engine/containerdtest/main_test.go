// Package containerdtest holds the engine's tests on a real containerd
// (root only: cri/harness starts a private containerd per test; without
// root they skip). They drive the engine through its exported API
// (engine.New, Run, Pods, PodHistory, NodeHistory) and feed the same two
// checks as the engine package's tests, whose union engine/internal/suite
// checks (engine/doc.go, # Tests).
package containerdtest

import (
	"testing"

	"github.com/speclet/speclet/engine/internal/suite"
)

func TestMain(m *testing.M) { suite.Main(m, "engine/containerdtest") }

// formatPods, formatContainer: pods and containers as the engine scripts
// print them; the tests show them when they fail.
var (
	formatPods      = suite.FormatPods
	formatContainer = suite.FormatContainer
)
