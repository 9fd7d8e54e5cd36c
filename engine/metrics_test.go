package engine

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/cri/sim"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/internal/logbuf"
	"github.com/speclet/speclet/engine/internal/suite"
	"github.com/speclet/speclet/engine/metrics"
)

// TestMetricsAfterAPodsLife scrapes the registry after a pod crashed once,
// restarted and was removed on the simulated runtime: the transition
// counters of the rows it took moved, every other row of the spec is
// exported at 0, events the machines refused are counted, the time spent
// in running was observed, and the machines gauge counts what runs now.
func TestMetricsAfterAPodsLife(t *testing.T) { synctest.Test(t, testMetricsAfterAPodsLife) }

func testMetricsAfterAPodsLife(t *testing.T) {
	h := newHarness(t)
	h.start(Config{})
	grace := int64(1)
	mk := func(name string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name),
			Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
			Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace, HostNetwork: true,
				Containers: []v1.Container{{Name: "app", Image: "busybox:latest", ImagePullPolicy: v1.PullIfNotPresent}}}}
	}
	crash := mk("crash")
	h.srv.Runtime.OnContainer(sim.Match{Pod: "crash", Name: "app"}, sim.Behavior{Exit: &sim.Exit{After: time.Second, Code: 1}})
	steady := mk("steady")
	h.send(config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{crash, steady}, Source: config.SourceFile})
	h.step(3*time.Second, time.Second)
	h.send(config.PodUpdate{Op: config.OpRemove, Pods: []*v1.Pod{crash}, Source: config.SourceFile})
	h.step(3*time.Second, time.Second)

	tr := func(machine, from, to, event string) float64 {
		return suite.Scraped(t, h.reg, "speclet_transitions_total", "machine", machine, "from", from, "to", to, "event", event)
	}
	for _, c := range []struct {
		machine, from, to, event string
		atLeast                  float64
	}{
		{"pod", "pending", "syncing", "update", 2},
		{"pod", "terminating", "terminated", "termination_done", 1},
		{"pod", "terminated", "finished", "cleanup_done", 1},
		{"sandbox", "none", "creating", "create", 2},
		{"container", "running", "exited", "died", 1},
		{"container", "exited", "crashloop_backoff", "exit_recorded", 1},
		{"container", "crashloop_backoff", "waiting", "backoff_done", 1},
	} {
		if got := tr(c.machine, c.from, c.to, c.event); got < c.atLeast {
			t.Errorf("speclet_transitions_total{%s %s -%s-> %s} = %v, want >= %v", c.machine, c.from, c.event, c.to, got, c.atLeast)
		}
	}
	// Rows no pod took are exported at 0 from the start.
	fams, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	if n := len(byName["speclet_transitions_total"].GetMetric()); n < len(metrics.TransitionLabels()) {
		t.Errorf("speclet_transitions_total has %d series, want every one of the spec's %d", n, len(metrics.TransitionLabels()))
	}
	if got := tr("sandbox", "checking", "dead", "died"); got != 0 {
		t.Errorf("an untaken row counts %v", got)
	}
	// A running container sees sync's start as an internal row; a sandbox
	// that is ready takes create internally; refused events are counted.
	if f := byName["speclet_rejected_events_total"]; f == nil || len(f.GetMetric()) == 0 {
		t.Error("no refused event was counted (the pod machine refuses update in terminated, for one)")
	}
	hist := byName["speclet_state_duration_seconds"]
	var runningObs uint64
	for _, m := range hist.GetMetric() {
		if suite.Label(m, "machine") == "container" && suite.Label(m, "state") == "running" {
			runningObs = m.GetHistogram().GetSampleCount()
		}
	}
	if runningObs < 2 {
		t.Errorf("speclet_state_duration_seconds{container,running} observed %d times, want >= 2 (two crashes)", runningObs)
	}
	gauge := map[string]float64{}
	for _, m := range byName["speclet_machines"].GetMetric() {
		gauge[suite.Label(m, "machine")+"/"+suite.Label(m, "state")] = m.GetGauge().GetValue()
	}
	if gauge["pod/synced"] != 1 || gauge["container/running"] != 1 || gauge["sandbox/ready"] != 1 || gauge["pod/terminated"] != 0 {
		t.Errorf("speclet_machines = %v, want the steady pod synced, ready, running and nothing else", nonzero(gauge))
	}

	// kubelet's equivalents.
	count := func(name string) uint64 {
		var n uint64
		for _, m := range byName[name].GetMetric() {
			n += m.GetHistogram().GetSampleCount()
		}
		return n
	}
	value := func(name string, labels ...string) float64 {
		for _, m := range byName[name].GetMetric() {
			if len(labels) == 0 || suite.Label(m, labels[0]) == labels[1] {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		return -1
	}
	for _, c := range []struct {
		name string
		min  uint64
	}{
		{"speclet_pod_start_duration_seconds", 2}, // both pods started once (the crash's restart does not count)
		{"speclet_pod_start_sli_duration_seconds", 2},
		{"speclet_pod_worker_duration_seconds", 4}, // creates, syncs, a kill
		{"speclet_pleg_relist_duration_seconds", 1},
	} {
		if n := count(c.name); n < c.min || c.name == "speclet_pod_start_duration_seconds" && n != 2 {
			t.Errorf("%s observed %d times, want >= %d", c.name, n, c.min)
		}
	}
	if v := value("speclet_started_containers_total"); v < 3 {
		t.Errorf("speclet_started_containers_total = %v, want >= 3 (two starts and a restart)", v)
	}
	if v := value("speclet_running_pods"); v != 1 {
		t.Errorf("speclet_running_pods = %v, want 1", v)
	}
	if v := value("speclet_running_containers", "container_state", "running"); v != 1 {
		t.Errorf("speclet_running_containers{running} = %v, want 1", v)
	}
}

func nonzero(g map[string]float64) string {
	var out []string
	for k, v := range g {
		if v != 0 {
			out = append(out, k)
		}
	}
	return strings.Join(out, " ")
}

// TestOperatorLogLines: at the default level the engine logs one line per
// lifecycle step a person wants, with the pod, container, exit code and
// reason as fields: a start, a death with its exit code and the restart
// policy's answer, the kill of the pod and its end.
func TestOperatorLogLines(t *testing.T) { synctest.Test(t, testOperatorLogLines) }

func testOperatorLogLines(t *testing.T) {
	h := newHarness(t)
	var logs logbuf.Buffer
	h.logw = &logs
	h.start(Config{})
	grace := int64(1)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "crash", Namespace: "default", UID: "crash",
		Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace, HostNetwork: true,
			Containers: []v1.Container{{Name: "app", Image: "busybox:latest", ImagePullPolicy: v1.PullIfNotPresent}}}}
	h.srv.Runtime.OnContainer(sim.Match{Pod: "crash", Name: "app"}, sim.Behavior{Exit: &sim.Exit{After: time.Second, Code: 3}})
	h.send(config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{pod}, Source: config.SourceFile})
	h.step(2*time.Second, time.Second)
	h.send(config.PodUpdate{Op: config.OpRemove, Pods: []*v1.Pod{pod}, Source: config.SourceFile})
	h.step(4*time.Second, time.Second)
	out := logs.String()
	for _, want := range []string{
		`msg="container started" pod=default/crash container=app`,
		`msg="container died" pod=default/crash container=app uid=crash exit-code=3 reason=Error next=crashloop_backoff`,
		`msg="killing pod" pod=default/crash uid=crash event=kill`,
		`msg="pod finished: nothing of it is left in the runtime" pod=default/crash`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the info log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "level=DEBUG") {
		t.Error("debug lines at the default level")
	}
}
