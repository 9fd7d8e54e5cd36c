package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/speclet/speclet/engine/eviction"
	"github.com/speclet/speclet/engine/resources"
)

// scriptConfig is the engine's Config of a script's "start" command: its
// arguments set what a flag of speclet run would.
func (h *scriptHarness) scriptConfig(t *testing.T, d *datadriven.TestData) Config {
	var cfg Config
	if d.HasArg("crashloop") {
		var s string
		d.ScanArgs(t, "crashloop", &s)
		cfg.CrashLoopBackOffBase, _ = time.ParseDuration(s)
	}
	if d.HasArg("alloc-cpu") || d.HasArg("alloc-memory") {
		var c, m string
		d.ScanArgs(t, "alloc-cpu", &c)
		d.ScanArgs(t, "alloc-memory", &m)
		cfg.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse(c), v1.ResourceMemory: resource.MustParse(m)}
	}
	// Probe jitter is fixed (default 0) so scripts never depend on chance.
	jitter := time.Duration(0)
	if d.HasArg("jitter") {
		var s string
		d.ScanArgs(t, "jitter", &s)
		jitter, _ = time.ParseDuration(s)
	}
	cfg.ProbeJitter = func(time.Duration) time.Duration { return jitter }
	// node-labels=(K:V,...): the Node's labels (Config.Node).
	if d.HasArg("node-labels") {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node", Labels: map[string]string{}}}
		for _, a := range d.CmdArgs {
			if a.Key != "node-labels" {
				continue
			}
			for _, kv := range a.Vals {
				k, v, _ := strings.Cut(kv, ":")
				n.Labels[k] = v
			}
		}
		cfg.Node = func(bool) *v1.Node { return n.DeepCopy() }
	}
	// runtime-classes=(NAME:HANDLER,...): the RuntimeClass API;
	// the handler "!error" makes the lookup of NAME fail.
	if d.HasArg("runtime-classes") {
		classes := map[string]string{}
		for _, a := range d.CmdArgs {
			if a.Key != "runtime-classes" {
				continue
			}
			for _, nh := range a.Vals {
				n, hd, _ := strings.Cut(nh, ":")
				classes[n] = hd
			}
		}
		cfg.RuntimeClasses = func(name string) (string, error) {
			hd, ok := classes[name]
			switch {
			case !ok:
				return "", apierrors.NewNotFound(schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclasses"}, name)
			case hd == "!error":
				return "", fmt.Errorf("the RuntimeClass cache is not synced")
			}
			return hd, nil
		}
	}
	if d.HasArg("sources") {
		var s string
		d.ScanArgs(t, "sources", &s)
		cfg.Sources = strings.Split(s, ",")
	}
	if d.HasArg("image-fs") {
		var s string
		d.ScanArgs(t, "image-fs", &s)
		q := resource.MustParse(s)
		h.imageFs = uint64(q.Value())
	}
	if d.HasArg("image-gc-period") {
		var s string
		d.ScanArgs(t, "image-gc-period", &s)
		cfg.ImageGCPeriod, _ = time.ParseDuration(s)
	}
	if d.HasArg("eviction-hard") || d.HasArg("eviction-soft") {
		var hard, soft, grace string
		if d.HasArg("eviction-hard") {
			d.ScanArgs(t, "eviction-hard", &hard)
		}
		if d.HasArg("eviction-soft") {
			d.ScanArgs(t, "eviction-soft", &soft)
			d.ScanArgs(t, "eviction-soft-grace", &grace)
		}
		ht, err := resources.ParseThresholds("eviction-hard", hard)
		if err != nil {
			t.Fatal(err)
		}
		st, err := resources.ParseThresholds("eviction-soft", soft)
		if err != nil {
			t.Fatal(err)
		}
		g, err := eviction.ParseGrace("eviction-soft-grace-period", grace)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Eviction = eviction.NewManager(eviction.Config{Hard: ht, Soft: st, Grace: g, Transition: 30 * time.Second})
		cfg.EvictionPeriod = 10 * time.Second
		cfg.Signals = h.measure
	}
	// Container GC: max-dead-per-container=N, max-dead=N (the
	// node-wide limit), min-container-age=D,
	// container-gc-period=D.
	if d.HasArg("max-dead-per-container") {
		d.ScanArgs(t, "max-dead-per-container", &cfg.ContainerGC.MaxPerContainer)
	}
	if d.HasArg("max-dead") {
		n := 0
		d.ScanArgs(t, "max-dead", &n)
		cfg.ContainerGC.MaxContainers = &n
	}
	if d.HasArg("min-container-age") {
		var s string
		d.ScanArgs(t, "min-container-age", &s)
		cfg.ContainerGC.MinAge, _ = time.ParseDuration(s)
	}
	if d.HasArg("container-gc-period") {
		var s string
		d.ScanArgs(t, "container-gc-period", &s)
		cfg.ContainerGCPeriod, _ = time.ParseDuration(s)
	}
	if d.HasArg("min-image-age") {
		var s string
		d.ScanArgs(t, "min-image-age", &s)
		cfg.ImageGC.MinAge, _ = time.ParseDuration(s)
	}
	return cfg
}
