package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestContainerDevices: the device plugins' devices, CDI devices, mounts,
// envs and annotations reach the CreateContainer config; their envs and
// mounts come before the container's own, speclet's annotations win a
// clash.
func TestContainerDevices(t *testing.T) {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p", "ns", "u"
	pod.Spec.Containers = []v1.Container{{Name: "c", Image: "img", Env: []v1.EnvVar{{Name: "OWN", Value: "1"}}}}
	d := &DeviceRun{
		Devices:     []*runtimeapi.Device{{ContainerPath: "/dev/x", HostPath: "/dev/null", Permissions: "rw"}},
		Mounts:      []*runtimeapi.Mount{{ContainerPath: "/x", HostPath: "/tmp/x"}},
		Envs:        []*runtimeapi.KeyValue{{Key: "DEV", Value: []byte("x")}},
		Annotations: map[string]string{"a": "plugin", "b": "plugin"},
		CDIDevices:  []*runtimeapi.CDIDevice{{Name: "example.com/dev=x"}},
	}
	cfg, err := Container(Node{RootDir: t.TempDir()}, ContainerRequest{Pod: pod, Container: &pod.Spec.Containers[0],
		Annotations: map[string]string{"a": "speclet"}, Devices: d})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Devices) != 1 || cfg.Devices[0].HostPath != "/dev/null" || len(cfg.CDIDevices) != 1 || cfg.CDIDevices[0].Name != "example.com/dev=x" {
		t.Errorf("devices %v CDI %v", cfg.Devices, cfg.CDIDevices)
	}
	if cfg.Envs[0].Key != "DEV" || cfg.Mounts[0].ContainerPath != "/x" {
		t.Errorf("first env %s, first mount %s: want the plugin's first", cfg.Envs[0].Key, cfg.Mounts[0].ContainerPath)
	}
	own := false
	for _, e := range cfg.Envs {
		own = own || e.Key == "OWN"
	}
	if !own {
		t.Error("the container's own env is gone")
	}
	if cfg.Annotations["a"] != "speclet" || cfg.Annotations["b"] != "plugin" {
		t.Errorf("annotations %v", cfg.Annotations)
	}
}
