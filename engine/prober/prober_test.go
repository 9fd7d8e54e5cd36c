package prober

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/fsm"
)

// TestRun: a worker's raw results reach a thresholded result only once a
// run of equal ones is as long as the probe's threshold, kubelet's
// resultRun: a different result starts a new run. "S" is a success, "F" a
// failure; the want column is what each Add reports (. for none yet).
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name             string
		success, failure int32
		results, want    string
	}{
		{name: "defaults: 1 success, 3 failures", results: "SFFFFS", want: "S..FFS"},
		{name: "a success breaks a run of failures", failure: 2, results: "FSFFF", want: ".S.FF"},
		{name: "successThreshold 3", success: 3, failure: 1, results: "SSFSSS", want: "..F..S"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1.Probe{SuccessThreshold: tc.success, FailureThreshold: tc.failure}
			var r Run
			var got strings.Builder
			for _, c := range tc.results {
				got.WriteByte(map[Result]byte{Unknown: '.', Success: 'S', Failure: 'F'}[r.Add(p, c == 'S')])
			}
			if got.String() != tc.want {
				t.Errorf("results %s: %s, want %s", tc.results, got.String(), tc.want)
			}
		})
	}
}

// TestFirstProbe: on the kind's ticks, after the worker's start and not
// within the instance's initial delay.
func TestFirstProbe(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := func(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Second))) }
	for _, tc := range []struct {
		name                     string
		period, delay            int32
		anchor, now, start, want float64
	}{
		{name: "next tick after now", period: 10, anchor: 0, now: 25, start: 20, want: 30},
		{name: "the tick at now is not taken", period: 10, anchor: 0, now: 30, start: 30, want: 40},
		{name: "anchor in the future (jitter)", period: 10, anchor: 7, now: 2, start: 1, want: 7},
		{name: "initial delay past the next tick", period: 10, delay: 15, anchor: 0, now: 21, start: 20, want: 40},
		{name: "initial delay ends on a tick", period: 10, delay: 10, anchor: 0, now: 21, start: 20, want: 30},
		{name: "default period", anchor: 0, now: 1, start: 0, want: 10},
	} {
		p := &v1.Probe{PeriodSeconds: tc.period, InitialDelaySeconds: tc.delay}
		if got := FirstProbe(p, s(tc.anchor), s(tc.now), s(tc.start)); !got.Equal(s(tc.want)) {
			t.Errorf("%s: first probe at %v, want %v s", tc.name, got.Sub(t0), tc.want)
		}
	}
	if got := Timeout(&v1.Probe{}); got != time.Second {
		t.Errorf("default timeout %v, want 1s", got)
	}
	if got := Timeout(&v1.Probe{TimeoutSeconds: 5}); got != 5*time.Second {
		t.Errorf("timeout %v, want 5s", got)
	}
}

// TestInput: the inputs of spec/routes.hcl; a liveness success is none.
func TestInput(t *testing.T) {
	for _, tc := range []struct {
		kind    Kind
		success bool
		want    fsm.Input
		ok      bool
	}{
		{Liveness, false, fsm.InputLivenessFailed, true},
		{Liveness, true, 0, false},
		{Readiness, true, fsm.InputReadinessSucceeded, true},
		{Readiness, false, fsm.InputReadinessFailed, true},
		{Startup, true, fsm.InputStartupSucceeded, true},
		{Startup, false, fsm.InputStartupFailed, true},
	} {
		if got, ok := Input(tc.kind, tc.success); got != tc.want || ok != tc.ok {
			t.Errorf("Input(%s, %v) = %v, %v; want %v, %v", tc.kind, tc.success, got, ok, tc.want, tc.ok)
		}
	}
	for _, k := range []Kind{Liveness, Readiness, Startup} {
		if got, ok := ParseKind(k.String()); !ok || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), got, ok)
		}
	}
	if _, ok := ParseKind("sideways"); ok {
		t.Error("ParseKind accepts an unknown kind")
	}
	c := &v1.Container{ReadinessProbe: &v1.Probe{PeriodSeconds: 3}}
	if Of(c, Readiness) != c.ReadinessProbe || Of(c, Liveness) != nil || Of(nil, Startup) != nil {
		t.Error("Of does not pick the container's probe of the kind")
	}
}
