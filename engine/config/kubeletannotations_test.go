package config

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/speclet/speclet/engine/runtimepods"
)

// TestKubeletAnnotations: for each container of the static pods kubelet
// v1.34.4 ran on a real node (engine/staticuid/testdata, recorded by
// test/conformance's TestSwapKubeletToSpeclet -conformance.record), the
// kubelet annotations speclet writes (runtimepods.KubeletAnnotations of the
// pod as speclet reads the manifest) are the ones kubelet wrote, byte for
// byte: the hash, the restart count, the termination message's, the grace
// period, and the JSON of the preStop hook and of the ports.
func TestKubeletAnnotations(t *testing.T) {
	b, err := os.ReadFile("../staticuid/testdata/kubelet-v1.34.4.json")
	if err != nil {
		t.Fatal(err)
	}
	var rs []struct {
		Path, Node, Manifest string
		Containers           []struct {
			Name        string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rs {
		decoded, err := decodePod([]byte(r.Manifest), r.Path)
		if err != nil {
			t.Fatal(err)
		}
		pod, err := staticPod(decoded, SourceFile, r.Path, r.Path, r.Node)
		if err != nil {
			t.Fatal(err)
		}
		for _, rc := range r.Containers {
			if len(rc.Annotations) == 0 {
				t.Fatalf("%s/%s: no annotations recorded", pod.Name, rc.Name)
			}
			var ours map[string]string
			for i := range pod.Spec.Containers {
				if c := &pod.Spec.Containers[i]; c.Name == rc.Name {
					ours = runtimepods.KubeletAnnotations(pod, c, 0)
				}
			}
			for k, want := range rc.Annotations {
				seen[k] = true
				if got, ok := ours[k]; !ok || got != want {
					t.Errorf("%s/%s: %s = %q, kubelet's %q", pod.Name, rc.Name, k, got, want)
				}
			}
			for k, got := range ours {
				if _, ok := rc.Annotations[k]; !ok && strings.HasPrefix(k, "io.kubernetes.") {
					t.Errorf("%s/%s: %s = %q, which kubelet did not write", pod.Name, rc.Name, k, got)
				}
			}
		}
	}
	for _, k := range []string{runtimepods.KubeletPreStopHandler, runtimepods.KubeletContainerPorts, runtimepods.KubeletContainerHash} {
		if !seen[k] {
			t.Errorf("no recorded container has %s: the recording lacks what the test compares", k)
		}
	}
}
