package devicemanager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/speclet/speclet/engine/devicemanager/checkpoint"
)

const res = "example.com/dev"

// TestLifecycle: a plugin registers, its healthy devices are allocatable
// and all are in capacity; a pod gets devices at admission and their
// devices, mounts, envs, annotations and CDI devices at creation; a pod
// asking for more than is free is refused with kubelet's message; a
// device turning unhealthy leaves allocatable; the plugin's death makes
// every device unhealthy (allocatable 0, capacity kept); a restart of the
// manager keeps the allocation (checkpoint) and the plugin registers again.
func TestLifecycle(t *testing.T) {
	dir := t.TempDir()
	m, changed := startManager(t, dir)
	p := newFakePlugin(t, dir, res, "dp.sock", healthy("d1", "d2", "d3")...)
	p.opts.PreStartRequired = true
	if err := p.register(m); err != nil {
		t.Fatalf("register: %v", err)
	}
	waitFor(t, changed, "3 devices", func() bool { c, a := counts(m, res); return c == 3 && a == 3 })

	a := devicePod("a", res, 2)
	if err := m.Allocate(context.Background(), a, nil); err != nil {
		t.Fatalf("allocate: %v", err)
	}
	run, err := m.RunOptions(context.Background(), a, &a.Spec.Containers[0])
	if err != nil {
		t.Fatalf("run options: %v", err)
	}
	got := fmt.Sprint(len(run.Devices), len(run.Mounts), len(run.Envs), len(run.Annotations), len(run.CDIDevices))
	if got != "2 2 2 2 2" {
		t.Errorf("devices, mounts, envs, annotations, CDI devices: %s, want 2 of each", got)
	}
	if run.CDIDevices[0].Name != res+"=d1" || string(run.Envs[0].Value) != "d1" || run.Mounts[0].HostPath != "/tmp/d1" || !run.Mounts[0].Readonly {
		t.Errorf("first CDI device %s, env %s=%s, mount %v", run.CDIDevices[0].Name, run.Envs[0].Key, run.Envs[0].Value, run.Mounts[0])
	}
	if n := len(p.preStarts); n != 1 || strings.Join(p.preStarts[0], ",") != "d1,d2" {
		t.Errorf("PreStartContainer calls %v, want one of d1,d2", p.preStarts)
	}
	if cd := m.ContainerDevices("a", "c"); len(cd) != 2 || cd[0].ResourceName != res || cd[0].DeviceIds[0] != "d1" {
		t.Errorf("ContainerDevices %v", cd)
	}
	if ad := m.AllocatableDevices(); len(ad) != 3 {
		t.Errorf("AllocatableDevices %v, want the 3 healthy devices", ad)
	}

	b := devicePod("b", res, 2)
	err = m.Allocate(context.Background(), b, []*v1.Pod{a})
	want := "requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1"
	if err == nil || err.Error() != want {
		t.Fatalf("second pod: %v, want %q", err, want)
	}

	p.updates <- []*pluginapi.Device{{ID: "d1", Health: pluginapi.Healthy}, {ID: "d2", Health: pluginapi.Healthy}, {ID: "d3", Health: pluginapi.Unhealthy}}
	waitFor(t, changed, "d3 unhealthy", func() bool { c, a := counts(m, res); return c == 3 && a == 2 })

	p.stop()
	waitFor(t, changed, "the plugin gone", func() bool { c, a := counts(m, res); return c == 3 && a == 0 })

	m.Stop()
	if _, err := checkpoint.Read(dir); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	m2, changed2 := startManager(t, dir)
	if cd := m2.ContainerDevices("a", "c"); len(cd) != 2 {
		t.Fatalf("after a restart ContainerDevices %v, want a's 2 devices", cd)
	}
	if c, a := counts(m2, res); c != 0 || a != 0 {
		t.Errorf("after a restart before the plugin: capacity %d allocatable %d, want 0 0", c, a)
	}
	if _, ok := m2.Capacity(); ok == nil {
		t.Error("nil allocatable")
	}
	p.start()
	if err := p.register(m2); err != nil {
		t.Fatalf("register again: %v", err)
	}
	waitFor(t, changed2, "the plugin back", func() bool { c, a := counts(m2, res); return c == 3 && a == 3 })
	run, err = m2.RunOptions(context.Background(), a, &a.Spec.Containers[0])
	if err != nil || len(run.Devices) != 2 {
		t.Fatalf("run options after a restart: %v, %v", run, err)
	}
	if n := len(p.allocated); n != 1 {
		t.Errorf("Allocate calls %d, want 1: the restart kept the allocation", n)
	}
	// a is still running: b gets the one device left only.
	if err := m2.Allocate(context.Background(), devicePod("b", res, 1), []*v1.Pod{a}); err != nil {
		t.Fatalf("b after restart: %v", err)
	}
	if cd := m2.ContainerDevices("b", "c"); len(cd) != 1 || cd[0].DeviceIds[0] != "d3" {
		t.Errorf("b's devices %v, want d3", cd)
	}
}

// TestBadRegistrations: a wrong API version, a resource name that is not
// an extended resource name, an endpoint outside the directory, one that
// does not answer: each a clear error, and the plugin registered before
// is undisturbed.
func TestBadRegistrations(t *testing.T) {
	dir := t.TempDir()
	m, changed := startManager(t, dir)
	good := newFakePlugin(t, dir, res, "good.sock", healthy("d1")...)
	if err := good.register(m); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changed, "the good plugin", func() bool { _, a := counts(m, res); return a == 1 })
	for _, tc := range []struct {
		req  *pluginapi.RegisterRequest
		want string
	}{
		{&pluginapi.RegisterRequest{Version: "v1alpha", Endpoint: "x.sock", ResourceName: "example.com/x"}, `requested API version "v1alpha" is not supported by kubelet`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "x.sock", ResourceName: "nodomain"}, `the ResourceName "nodomain" is invalid`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "x.sock", ResourceName: "kubernetes.io/gpu"}, `the ResourceName "kubernetes.io/gpu" is invalid`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "x.sock", ResourceName: "example.com/bad name"}, `is invalid`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "../x.sock", ResourceName: "example.com/x"}, `is not the name of a socket in`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "missing.sock", ResourceName: "example.com/x"}, `failed to dial device plugin`},
	} {
		err := registerWith(m, tc.req)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("register %v: %v, want %q", tc.req, err, tc.want)
		}
	}
	if got := m.Resources(); len(got) != 1 || got[0] != res {
		t.Errorf("resources %v, want only %s", got, res)
	}
	if c, a := counts(m, res); c != 1 || a != 1 {
		t.Errorf("the good plugin: capacity %d allocatable %d, want 1 1", c, a)
	}
}

// TestDiesMidAllocate: a plugin that dies while it allocates fails that
// pod's admission with the plugin's error; the pod allocated before keeps
// its devices, and its devices are not lost for the next allocation.
func TestDiesMidAllocate(t *testing.T) {
	dir := t.TempDir()
	m, changed := startManager(t, dir)
	p := newFakePlugin(t, dir, res, "dp.sock", healthy("d1", "d2")...)
	if err := p.register(m); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changed, "2 devices", func() bool { _, a := counts(m, res); return a == 2 })
	a := devicePod("a", res, 1)
	if err := m.Allocate(context.Background(), a, nil); err != nil {
		t.Fatal(err)
	}
	p.dies = true
	err := m.Allocate(context.Background(), devicePod("b", res, 1), []*v1.Pod{a})
	if err == nil {
		t.Fatal("allocate through a dying plugin: no error")
	}
	t.Logf("error: %v", err)
	if !strings.HasPrefix(err.Error(), "device plugin example.com/dev: Allocate: rpc error") {
		t.Errorf("error %q, want the plugin's Allocate named", err)
	}
	if cd := m.ContainerDevices("a", "c"); len(cd) != 1 {
		t.Errorf("a's devices %v after b's failure", cd)
	}
	if cd := m.ContainerDevices("b", "c"); len(cd) != 0 {
		t.Errorf("b's devices %v, want none", cd)
	}
	waitFor(t, changed, "the plugin gone", func() bool { _, a := counts(m, res); return a == 0 })
	err = m.Allocate(context.Background(), devicePod("c", res, 1), []*v1.Pod{a})
	if err == nil || !strings.Contains(err.Error(), "no healthy devices present") {
		t.Errorf("allocate after the plugin died: %v", err)
	}
}

// TestRegistrationFlood: registrations beyond MaxRegistrations in progress
// are refused at once (ResourceExhausted); those in progress complete.
func TestRegistrationFlood(t *testing.T) {
	dir := t.TempDir()
	m, changed := startManager(t, dir)
	gate := make(chan struct{})
	var plugins []*fakePlugin
	for i := 0; i < MaxRegistrations; i++ {
		p := newFakePlugin(t, dir, fmt.Sprintf("example.com/r%d", i), fmt.Sprintf("p%d.sock", i), healthy("d")...)
		p.optionsGate = gate
		plugins = append(plugins, p)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(plugins))
	for i, p := range plugins {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = p.register(m) }()
	}
	for _, p := range plugins {
		<-p.optionsSeen // every registration is in progress
	}
	extra := newFakePlugin(t, dir, "example.com/extra", "extra.sock", healthy("d")...)
	err := extra.register(m)
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("registration beyond %d in progress: %v, want ResourceExhausted", MaxRegistrations, err)
	}
	close(gate)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("registration %d: %v", i, err)
		}
	}
	waitFor(t, changed, "the plugins' devices", func() bool { return len(m.AllocatableDevices()) == MaxRegistrations })
	if err := extra.register(m); err != nil {
		t.Errorf("registration after the flood: %v", err)
	}
}

// TestPreferredAndReuse: the plugin's preferred devices are taken; an
// init container's devices are reused by the app container after it.
func TestPreferredAndReuse(t *testing.T) {
	dir := t.TempDir()
	m, changed := startManager(t, dir)
	p := newFakePlugin(t, dir, res, "dp.sock", healthy("d1", "d2", "d3")...)
	p.opts.GetPreferredAllocationAvailable = true
	p.preferred = []string{"d3"}
	if err := p.register(m); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changed, "3 devices", func() bool { _, a := counts(m, res); return a == 3 })
	pod := devicePod("a", res, 1)
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Resources: pod.Spec.Containers[0].Resources}}
	if err := m.Allocate(context.Background(), pod, nil); err != nil {
		t.Fatal(err)
	}
	ini, app := m.ContainerDevices("a", "init"), m.ContainerDevices("a", "c")
	if len(ini) != 1 || ini[0].DeviceIds[0] != "d3" || len(app) != 1 || app[0].DeviceIds[0] != "d3" {
		t.Errorf("init %v app %v, want the preferred d3 for both", ini, app)
	}
}

// TestStaleSockets: a start removes the sockets left in the directory but
// keeps the checkpoint and other files, and makes the registration socket.
func TestStaleSockets(t *testing.T) {
	dir := t.TempDir()
	stale := newFakePlugin(t, dir, res, "stale.sock")
	stale.server.Stop()
	if err := os.WriteFile(filepath.Join(dir, "notes"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m, _ := startManager(t, dir)
	if _, err := os.Stat(stale.socket); !os.IsNotExist(err) {
		t.Errorf("stale socket: %v, want removed", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes")); err != nil {
		t.Errorf("other file: %v", err)
	}
	if fi, err := os.Stat(m.SocketPath()); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("registration socket: %v", err)
	}
}
