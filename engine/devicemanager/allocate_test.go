package devicemanager

import (
	"context"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// TestReadmitted: pods whose devices the checkpoint holds, admitted anew
// after a restart (a node reboot: their containers are gone), as kubelet's
// devicesToAllocate treats them: refused while the plugin has not
// registered again or while a device given before is unhealthy, admitted
// with the same devices and no new Allocate call once they are healthy;
// before the sources are ready (nil active pods) no other pod's devices
// are freed.
func TestReadmitted(t *testing.T) {
	dir := t.TempDir()
	m, changed := startManager(t, dir)
	p := newFakePlugin(t, dir, res, "dp.sock", healthy("d1", "d2", "d3")...)
	if err := p.register(m); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changed, "3 devices", func() bool { _, a := counts(m, res); return a == 3 })
	a, b := devicePod("a", res, 2), devicePod("b", res, 1)
	if err := m.Allocate(context.Background(), a, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Allocate(context.Background(), b, nil); err != nil {
		t.Fatal(err)
	}
	p.stop()
	waitFor(t, changed, "the plugin gone", func() bool { _, a := counts(m, res); return a == 0 })
	m.Stop()

	m2, changed2 := startManager(t, dir)
	want := "no healthy devices present; cannot allocate unhealthy devices " + res
	if err := m2.Allocate(context.Background(), a, nil); err == nil || err.Error() != want {
		t.Errorf("a before its plugin registers: %v, want %q", err, want)
	}
	if cd := m2.ContainerDevices("b", "c"); len(cd) != 1 || cd[0].DeviceIds[0] != "d3" {
		t.Errorf("b's devices after a's admission before the sources are ready: %v, want d3 kept", cd)
	}

	p.mu.Lock()
	p.devs = []*pluginapi.Device{{ID: "d1", Health: pluginapi.Unhealthy}, {ID: "d2", Health: pluginapi.Healthy}, {ID: "d3", Health: pluginapi.Healthy}}
	p.mu.Unlock()
	p.start()
	if err := p.register(m2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changed2, "the plugin back, d1 unhealthy", func() bool { c, a := counts(m2, res); return c == 3 && a == 2 })
	want = "previously allocated devices are no longer healthy; cannot allocate unhealthy devices " + res
	if err := m2.Allocate(context.Background(), a, nil); err == nil || err.Error() != want {
		t.Errorf("a with d1 unhealthy: %v, want %q", err, want)
	}
	calls := len(p.allocated)
	if err := m2.Allocate(context.Background(), b, nil); err != nil {
		t.Fatalf("b with d3 healthy: %v", err)
	}
	if cd := m2.ContainerDevices("b", "c"); len(cd) != 1 || cd[0].DeviceIds[0] != "d3" {
		t.Errorf("b's devices %v, want d3", cd)
	}
	if n := len(p.allocated); n != calls {
		t.Errorf("Allocate calls %d, want %d: b's devices were given before", n, calls)
	}
}
