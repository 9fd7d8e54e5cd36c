package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri/sim"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/eviction"
)

func TestEngineScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		synctest.Test(t, func(t *testing.T) { runScript(t, path) })
	})
}

// runScript runs one script of testdata/ in the test's bubble.
func runScript(t *testing.T, path string) {
	{
		h := newHarness(t)
		pods := map[string]*v1.Pod{}
		nodeSeen := 0
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "start":
				h.start(h.scriptConfig(t, d))
				return ""
			case "exec-reply":
				// Change how the runtime answers an exec from now on.
				var pod, name, spec string
				d.ScanArgs(t, "pod", &pod)
				d.ScanArgs(t, "container", &name)
				d.ScanArgs(t, "reply", &spec)
				_, reply := execHook(t, d, spec)
				h.srv.Runtime.SetExec(sim.Match{Pod: pod, Name: name}, reply)
				return ""
			case "restart":
				h.stop()
				h.start(h.cfg)
				return ""
			case "add", "update":
				pod := h.parsePod(d)
				pods[string(pod.UID)] = pod
				h.noteAdded(pod.Name)
				op := config.OpAdd
				if d.Cmd == "update" {
					op = config.OpUpdate
				}
				h.send(config.PodUpdate{Op: op, Pods: []*v1.Pod{pod}, Source: config.SourceFile})
				return ""
			case "reconcile":
				// reconcile uid=UID conditions=(TYPE:STATUS,...): the
				// source's status of the pod changed (others' conditions).
				var uid string
				d.ScanArgs(t, "uid", &uid)
				pod := pods[uid].DeepCopy()
				for _, a := range d.CmdArgs {
					if a.Key != "conditions" {
						continue
					}
					for _, kv := range a.Vals {
						k, v, _ := strings.Cut(kv, ":")
						pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: v1.PodConditionType(k), Status: v1.ConditionStatus(v)})
					}
				}
				h.send(config.PodUpdate{Op: config.OpReconcile, Pods: []*v1.Pod{pod}, Source: config.SourceFile})
				return ""
			case "source-ready":
				// A source's first snapshot, declaring no pod.
				var src string
				d.ScanArgs(t, "source", &src)
				h.send(config.PodUpdate{Op: config.OpAdd, Source: src})
				return ""
			case "remove", "delete":
				var uid string
				d.ScanArgs(t, "uid", &uid)
				pod := pods[uid].DeepCopy()
				op := config.OpRemove
				if d.Cmd == "delete" {
					// The API's graceful deletion: the object keeps
					// being listed, marked, until the node deletes it.
					op = config.OpDelete
					var g int64
					d.ScanArgs(t, "grace", &g)
					pod.DeletionGracePeriodSeconds = &g
					ts := metav1.NewTime(h.clk.Now())
					pod.DeletionTimestamp = &ts
					pods[uid] = pod.DeepCopy()
				}
				h.send(config.PodUpdate{Op: op, Pods: []*v1.Pod{pod}, Source: config.SourceFile})
				return ""
			case "tick":
				var s string
				d.ScanArgs(t, "d", &s)
				dur, err := time.ParseDuration(s)
				if err != nil {
					t.Fatal(err)
				}
				step := time.Second
				if d.HasArg("step") {
					d.ScanArgs(t, "step", &s)
					step, _ = time.ParseDuration(s)
				}
				h.step(dur, step)
				return ""
			case "pods":
				return formatPods(h.eng.Pods())
			case "messages":
				// The waiting messages of GET /pods.
				return formatMessages(h.eng.Pods(), h.dir)
			case "runtime":
				return h.formatRuntime()
			case "calls":
				var out []string
				for _, a := range d.CmdArgs {
					out = append(out, fmt.Sprintf("%s=%d", a.Key, h.srv.Runtime.Calls(a.Key)))
				}
				return strings.Join(out, " ")
			case "events":
				return h.events.take()
			case "recorded":
				// The events recorded through Config.Events (to the API).
				return h.recorded.take()
			case "probe-times":
				// The probes (ExecSync) since the last probe-times, each
				// with its time since the pod's add and its container's start.
				return h.formatProbeTimes()
			case "calllog":
				// calllog [sorted]: sorted for calls made in parallel
				// (containers of one group stop concurrently).
				return h.formatCallLog(d.HasArg("sorted"))
			case "image":
				// An image pulled beside the engine (crictl pull), of size bytes.
				var ref, size string
				d.ScanArgs(t, "ref", &ref)
				d.ScanArgs(t, "size", &size)
				q := resource.MustParse(size)
				h.srv.Runtime.AddImage(ref, uint64(q.Value()))
				return ""
			case "images":
				return h.formatImages()
			case "signal":
				// What the eviction manager measures from now on:
				// signal name=memory.available available=Q capacity=Q,
				// or signal fail=N.
				h.sigMu.Lock()
				if d.HasArg("fail") {
					d.ScanArgs(t, "fail", &h.signalsErr)
				} else {
					var name, avail, capacity string
					d.ScanArgs(t, "name", &name)
					d.ScanArgs(t, "available", &avail)
					d.ScanArgs(t, "capacity", &capacity)
					if h.signals == nil {
						h.signals = eviction.Observations{}
					}
					a, c := resource.MustParse(avail), resource.MustParse(capacity)
					h.signals[name] = eviction.Observation{Available: a.Value(), Capacity: c.Value()}
				}
				h.sigMu.Unlock()
				return ""
			case "usage":
				// What ListContainerStats reports for a pod's containers.
				var pod, mem, disk string
				d.ScanArgs(t, "pod", &pod)
				mem, disk = "0", "0"
				if d.HasArg("memory") {
					d.ScanArgs(t, "memory", &mem)
				}
				if d.HasArg("disk") {
					d.ScanArgs(t, "disk", &disk)
				}
				m, dk := resource.MustParse(mem), resource.MustParse(disk)
				h.srv.Runtime.SetUsage(pod, "", sim.Usage{MemoryWorkingSet: uint64(m.Value()), WritableLayer: uint64(dk.Value())})
				return ""
			case "conditions":
				// The node's pressure conditions (the Node status's source).
				var out []string
				for c, on := range h.eng.cfg.Eviction.Conditions() {
					out = append(out, fmt.Sprintf("%s=%v", c, on))
				}
				sort.Strings(out)
				return strings.Join(out, " ")
			case "node-history":
				// The node machine's transitions since the last node-history.
				out, n := h.formatNodeHistory(nodeSeen)
				nodeSeen = n
				return out
			case "missing-image":
				h.srv.Runtime.MissingImage(arg[string](t, d, "ref"))
				return ""
			case "slow":
				dur, _ := time.ParseDuration(arg[string](t, d, "d"))
				h.srv.Runtime.SlowCall(arg[string](t, d, "call"), dur)
				return ""
			case "fail":
				call, n := arg[string](t, d, "call"), arg[int](t, d, "n")
				msg := "scripted failure"
				if d.HasArg("msg") {
					d.ScanArgs(t, "msg", &msg)
				}
				code := codes.Unknown
				if d.HasArg("code") {
					var s string
					d.ScanArgs(t, "code", &s)
					if err := code.UnmarshalJSON([]byte(`"` + strings.ToUpper(s) + `"`)); err != nil {
						t.Fatalf("%s: code %q: %v", d.Pos, s, err)
					}
				}
				h.srv.Runtime.FailCall(call, n, code, msg)
				return ""
			case "lose-reply":
				// The next n calls of a method do their work in the
				// runtime, but the engine sees them fail (deadline
				// exceeded), as when a reply is lost.
				h.srv.Runtime.LoseReply(arg[string](t, d, "call"), arg[int](t, d, "n"))
				return ""
			case "start-late":
				// The next n StartContainer calls time out at the client
				// while the runtime holds them back; finish-late-starts
				// carries them out later.
				h.srv.Runtime.StartLate(arg[int](t, d, "n"))
				return ""
			case "finish-late-starts":
				// The runtime starts what start-late held back; with
				// unknown, it then reports those containers in state
				// UNKNOWN.
				n := h.srv.Runtime.FinishLateStarts(d.HasArg("unknown"))
				h.settle()
				return fmt.Sprintf("started %d\n", n)
			case "crictl-rm":
				// Remove a pod's container behind the engine's back.
				var pod, name string
				d.ScanArgs(t, "pod", &pod)
				d.ScanArgs(t, "container", &name)
				cs, err := h.rt.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
					LabelSelector: map[string]string{LabelPodUID: pod, LabelContainerName: name}})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range cs {
					if err := h.rt.RemoveContainer(context.Background(), c.Id); err != nil {
						t.Fatal(err)
					}
				}
				h.settle()
				return fmt.Sprintf("removed %d", len(cs))
			case "kill-sandbox":
				// Kill the pause process of a pod's READY sandbox behind
				// the engine's back (kill -9, the OOM killer): the runtime
				// shows the sandbox NOTREADY (see sim.Runtime.KillSandbox).
				var pod string
				d.ScanArgs(t, "pod", &pod)
				sbs, err := h.rt.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
					LabelSelector: map[string]string{LabelPodUID: pod},
					State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
				if err != nil {
					t.Fatal(err)
				}
				for _, sb := range sbs {
					if err := h.srv.Runtime.KillSandbox(sb.Id); err != nil {
						t.Fatal(err)
					}
				}
				h.settle()
				return fmt.Sprintf("killed %d", len(sbs))
			case "pending":
				// A script of behaviour the engine does not have yet: the
				// input says what it waits for. Remove the directive to run
				// the script.
				t.Skipf("%s: pending: %s", d.Pos, strings.TrimSpace(d.Input))
				return ""
			case "probe":
				var uid, name, kind, result string
				d.ScanArgs(t, "uid", &uid)
				d.ScanArgs(t, "container", &name)
				d.ScanArgs(t, "kind", &kind)
				d.ScanArgs(t, "result", &result)
				k, ok := ParseProbeKind(kind)
				if !ok {
					t.Fatalf("%s: probe kind %q", d.Pos, kind)
				}
				h.eng.handleProbe(ProbeResult{UID: types.UID(uid), Container: name, Kind: k, Success: result == "success"})
				h.settle()
				return ""
			case "runtime-down":
				h.srv.Stop()
				return ""
			case "runtime-up":
				h.srv = h.srv.Runtime.ServeListener(h.listen(), h.srv.Endpoint)
				// gRPC reconnects on its own backoff timer, on the bubble's
				// time: the engine's connection answers again once that
				// time passed (it costs no real time).
				ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), waitReady{}, true), 30*time.Second)
				_, err := h.audit.Version(ctx) // the engine's client: a read, outside actions
				cancel()
				if err != nil {
					t.Fatalf("runtime did not answer 30 s after it came back: %v", err)
				}
				return ""
			case "healthz":
				err := h.eng.Healthz()
				if err == nil {
					return "ok"
				}
				// The causes name socket paths of this run: keep the gist.
				var out []string
				for _, l := range strings.Split(err.Error(), "\n") {
					l, _, _ = strings.Cut(l, ": cri ")
					l, _, _ = strings.Cut(l, ": relist")
					out = append(out, l)
				}
				return strings.Join(out, "\n")
			case "transitions":
				var machine string
				d.ScanArgs(t, "machine", &machine)
				return h.formatTransitions(machine)
			case "rejected":
				return h.formatRejected(arg[string](t, d, "machine"))
			case "history":
				// What GET /debug/pods/{uid} shows of a pod: its machines
				// now and every transition, with the time since start.
				var uid, machine string
				d.ScanArgs(t, "uid", &uid)
				if d.HasArg("machine") {
					d.ScanArgs(t, "machine", &machine)
				}
				return h.formatHistory(uid, machine)
			default:
				t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
				return ""
			}
		})
	}
}

// arg is the value of the script command's argument key (the test fails
// when it is missing or does not parse as a T).
func arg[T any](t *testing.T, d *datadriven.TestData, key string) T {
	t.Helper()
	var v T
	d.ScanArgs(t, key, &v)
	return v
}
