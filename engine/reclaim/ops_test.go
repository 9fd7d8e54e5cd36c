package reclaim

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/containergc"
	"github.com/speclet/speclet/engine/eviction"
	"github.com/speclet/speclet/engine/imagegc"
	"github.com/speclet/speclet/engine/op/optest"
	"github.com/speclet/speclet/fsm"
)

// step is one operation a node action asks for (its name, and what it is
// about where the test checks it) and the reply the test feeds it.
type step struct {
	Op, About string
	V         any
	Err       error
}

// TestNodeActionsAsOperations drives the node machine's actions through
// the operations they return, fed the runtime's and the host's replies by
// hand: container GC, image GC and eviction decide without a runtime.
func TestNodeActionsAsOperations(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dead := func(id string, attempt uint32) *runtimeapi.Container {
		return &runtimeapi.Container{Id: id, Labels: map[string]string{"uid": "u1", "name": "app"}, State: runtimeapi.ContainerState_CONTAINER_EXITED,
			Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: attempt}, CreatedAt: t0.Add(time.Duration(attempt) * time.Minute).UnixNano()}
	}
	fsInfo := &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/images"}}}}
	images := []*runtimeapi.Image{{Id: "sha256:a", RepoTags: []string{"old:1"}, Size: 5}, {Id: "sha256:b", RepoTags: []string{"app:1"}, Size: 50},
		{Id: "sha256:p", RepoTags: []string{"pause:3.10"}, Size: 1}}
	inUse := []*runtimeapi.Container{{Id: "c", Image: &runtimeapi.ImageSpec{Image: "app:1"}}}
	status := &runtimeapi.StatusResponse{Info: map[string]string{"config": `{"sandboxImage":"pause:3.10"}`}}
	for _, tc := range []struct {
		name   string
		action string      // the spec name of an action of nodeOps
		setup  func(*Node) // what earlier actions left
		steps  []step
		report []fsm.NodeEvent
		plan   string // the image GC plan left for remove_unused_images
		failed bool
	}{
		{name: "container GC: the dead beyond the newest go, a gone one counts",
			action: "remove_dead_containers",
			steps: []step{{"ListContainers", "", []*runtimeapi.Container{dead("c0", 0), dead("c1", 1), dead("c2", 2)}, nil},
				{"RemoveContainer", "c0", nil, nil}, {"RemoveContainer", "c1", nil, errNotFound}},
			report: []fsm.NodeEvent{fsm.NodeEventContainersCollected}},
		{name: "container GC: a failed removal fails the pass, the others still go",
			action: "remove_dead_containers",
			steps: []step{{"ListContainers", "", []*runtimeapi.Container{dead("c0", 0), dead("c1", 1), dead("c2", 2)}, nil},
				{"RemoveContainer", "c0", nil, errors.New("busy")}, {"RemoveContainer", "c1", nil, nil}},
			report: []fsm.NodeEvent{fsm.NodeEventContainerGcFailed}, failed: true},
		{name: "container GC: no list, no pass",
			action: "remove_dead_containers",
			steps:  []step{{"ListContainers", "", nil, errors.New("unavailable")}},
			report: []fsm.NodeEvent{fsm.NodeEventContainerGcFailed}, failed: true},
		{name: "image GC: above the high threshold, the unused image is planned, the sandbox image kept",
			action: "measure_image_fs",
			steps: []step{{"ImageFsInfo", "", fsInfo, nil}, {"FsStat", "/var/lib/images", [2]uint64{100, 10}, nil},
				{"ListImages", "", images, nil}, {"ListContainers", "", inUse, nil}, {"Status", "verbose", status, nil}},
			report: []fsm.NodeEvent{fsm.NodeEventAboveHigh}, plan: "sha256:a (need 10)"},
		{name: "image GC: below the high threshold, nothing planned",
			action: "measure_image_fs",
			steps: []step{{"ImageFsInfo", "", fsInfo, nil}, {"FsStat", "/var/lib/images", [2]uint64{100, 50}, nil},
				{"ListImages", "", images, nil}, {"ListContainers", "", inUse, nil}, {"Status", "verbose", nil, errors.New("no info")}},
			report: []fsm.NodeEvent{fsm.NodeEventBelowHigh}, plan: " (need 0)"},
		{name: "image GC: no image filesystem named",
			action: "measure_image_fs",
			steps:  []step{{"ImageFsInfo", "", &runtimeapi.ImageFsInfoResponse{}, nil}},
			report: []fsm.NodeEvent{fsm.NodeEventMeasureFailed}, plan: " (need 0)", failed: true},
		{name: "image GC: the filesystem cannot be measured",
			action: "measure_image_fs",
			steps:  []step{{"ImageFsInfo", "", fsInfo, nil}, {"FsStat", "/var/lib/images", nil, errors.New("ENOENT")}},
			report: []fsm.NodeEvent{fsm.NodeEventMeasureFailed}, plan: " (need 0)", failed: true},
		{name: "image GC: removals until the need is freed",
			action: "remove_unused_images",
			setup: func(n *Node) {
				n.plan, n.need, n.sizes = []string{"x", "y", "z"}, 40, map[string]uint64{"x": 30, "y": 20, "z": 5}
			},
			steps:  []step{{"RemoveImage", "x", nil, nil}, {"RemoveImage", "y", nil, nil}},
			report: []fsm.NodeEvent{fsm.NodeEventCollected}, plan: " (need 40)"},
		{name: "image GC: too little removable",
			action: "remove_unused_images",
			setup:  func(n *Node) { n.plan, n.need, n.sizes = []string{"x", "y"}, 40, map[string]uint64{"x": 30, "y": 20} },
			steps:  []step{{"RemoveImage", "x", nil, nil}, {"RemoveImage", "y", nil, errors.New("in use")}},
			report: []fsm.NodeEvent{fsm.NodeEventCollectFailed}, plan: " (need 40)", failed: true},
		{name: "eviction: the signals cannot be measured",
			action: "observe_signals",
			steps:  []step{{"ImageFsInfo", "", nil, errors.New("unavailable")}, {"Signals", "", nil, errors.New("no /proc/meminfo")}},
			report: []fsm.NodeEvent{fsm.NodeEventObserveFailed}, failed: true},
		{name: "eviction: measured on the image filesystem, no pressure",
			action: "observe_signals",
			steps:  []step{{"ImageFsInfo", "", fsInfo, nil}, {"Signals", "/var/lib/images", eviction.Observations{}, nil}},
			report: []fsm.NodeEvent{fsm.NodeEventNoPressure}},
		{name: "eviction: memory is ranked by the containers' usage",
			action: "evict_pod", setup: func(n *Node) { n.decision = eviction.Decision{Signal: "memory.available"} },
			steps:  []step{{"ListContainerStats", "", []*runtimeapi.ContainerStats{}, nil}},
			failed: true}, // no pod to evict
		{name: "eviction: PIDs need no usage",
			action: "evict_pod", setup: func(n *Node) { n.decision = eviction.Decision{Signal: "pid.available"} },
			failed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reported []fsm.NodeEvent
			n := New(Config{Clock: clocktesting.NewFakeClock(t0.Add(time.Hour)), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Identify:    func(l map[string]string) (types.UID, string) { return types.UID(l["uid"]), l["name"] },
				Report:      func(ev fsm.NodeEvent) { reported = append(reported, ev) },
				Policy:      Policy{ImageGC: imagegc.Policy{High: 85, Low: 80}, Eviction: &eviction.Manager{}},
				ContainerGC: containergc.Policy{MaxPerContainer: 1, MaxContainers: -1}, Pods: pods{}})
			if tc.setup != nil {
				tc.setup(n)
			}
			o := optest.RunReplies(t, nodeOps, tc.action, n, tc.steps)
			if (o.Err() != nil) != tc.failed {
				t.Errorf("action error %v, want failed %v", o.Err(), tc.failed)
			}
			if fmt.Sprint(reported) != fmt.Sprint(tc.report) {
				t.Errorf("reported %v, want %v", reported, tc.report)
			}
			if plan := fmt.Sprintf("%s (need %d)", strings.Join(n.plan, ","), n.need); tc.plan != "" && plan != tc.plan {
				t.Errorf("plan %q, want %q", plan, tc.plan)
			}
		})
	}
}

// nodeOps are the node machine's actions that call the runtime, by spec
// name: the CRI methods each declares, and its first operation.
var nodeOps = map[string]optest.Action[*Node]{
	fsm.NodeActionMeasureImageFs.String():       {CRI: fsm.NodeActionCRI[fsm.NodeActionMeasureImageFs], First: (*Node).MeasureImageFs},
	fsm.NodeActionRemoveUnusedImages.String():   {CRI: fsm.NodeActionCRI[fsm.NodeActionRemoveUnusedImages], First: (*Node).RemoveUnusedImages},
	fsm.NodeActionRemoveDeadContainers.String(): {CRI: fsm.NodeActionCRI[fsm.NodeActionRemoveDeadContainers], First: (*Node).RemoveDeadContainers},
	fsm.NodeActionObserveSignals.String():       {CRI: fsm.NodeActionCRI[fsm.NodeActionObserveSignals], First: (*Node).ObserveSignals},
	fsm.NodeActionEvictPod.String():             {CRI: fsm.NodeActionCRI[fsm.NodeActionEvictPod], First: (*Node).EvictPod},
}

// TestNodeRuntimeActionsAreDriven: every action of the node machine whose
// spec declares CRI calls has its operations driven by this package's
// tests.
func TestNodeRuntimeActionsAreDriven(t *testing.T) {
	optest.Complete(t, "node", fsm.NodeActionCRI[:], func(i int) string { return fsm.NodeAction(i).String() }, nodeOps)
}

// errNotFound is a runtime's answer for an object it does not know.
var errNotFound = &cri.Error{Op: "RemoveContainer", Class: cri.ClassNotFound, Err: errors.New("not found")}
