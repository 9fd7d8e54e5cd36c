package worker

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/metrics"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/engine/pleg"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/engine/volume"
	"github.com/speclet/speclet/fsm"
)

// nopRuntime satisfies cri.Runtime for workers that never call it.
type nopRuntime struct{ cri.Runtime }

// nopEngine is an engine that owns no static name, whose runtime is never
// down and that jitters no probe.
type nopEngine struct{}

func (nopEngine) NameTaken(string, types.UID) bool            { return false }
func (nopEngine) ReleaseName(string, types.UID)               {}
func (nopEngine) WaitRuntime(context.Context) error           { return nil }
func (nopEngine) Context() context.Context                    { return context.Background() }
func (nopEngine) FirstProbeDelay(time.Duration) time.Duration { return 0 }

// testHost is a host as the engine builds it with its defaults, on a fake
// clock and a runtime that answers nothing, metrics on reg (nil: none).
func testHost(tb testing.TB, reg ...prometheus.Registerer) *Host {
	tb.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	root := tb.TempDir()
	var r prometheus.Registerer
	if len(reg) > 0 {
		r = reg[0]
	}
	m, err := metrics.New(r, nil)
	if err != nil {
		tb.Fatal(err)
	}
	rt := nopRuntime{}
	return &Host{
		RootDir:           root,
		Node:              podspec.Node{RootDir: root, Static: config.IsStatic},
		SyncFrequency:     fsm.PodDurationDefaults[fsm.PodDurationResync],
		GCMaxPerContainer: 1,
		Runtime:           rt,
		Clock:             clk,
		Log:               slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics:           m,
		Sinks:             observe.Sinks{Metrics: m},
		Volumes:           &volume.Manager{Root: root, Now: clk.Now},
		PLEG:              pleg.New(rt, clk, runtimepods.Identify),
		CrashBackoff:      NewBackoff(clk, fsm.ContainerDurationDefaults[fsm.ContainerDurationCrashloop], fsm.ContainerDurationMax[fsm.ContainerDurationCrashloop], 10*time.Minute),
		PullBackoff:       NewBackoff(clk, fsm.ContainerDurationDefaults[fsm.ContainerDurationImagePullBackoff], fsm.ContainerDurationMax[fsm.ContainerDurationImagePullBackoff], 10*time.Minute),
		RuntimeName:       "cri",
		Engine:            nopEngine{},
	}
}
