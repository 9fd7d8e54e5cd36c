package staticuid

import (
	"encoding/json"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// recorded is what kubelet v1.34.4 gave static pods on a real node
// (test/conformance's TestSwapKubeletToSpeclet -conformance.record):
// each manifest, its path and node, and the UID kubelet labelled its
// sandbox and containers with.
type recorded struct {
	Path     string `json:"path"`
	Node     string `json:"node"`
	Manifest string `json:"manifest"`
	UID      string `json:"uid"`
}

// TestOfKubelet: Of gives each recorded manifest kubelet's UID, and
// another path, node or URL another UID.
func TestOfKubelet(t *testing.T) {
	b, err := os.ReadFile("testdata/kubelet-v1.34.4.json")
	if err != nil {
		t.Fatal(err)
	}
	var rs []recorded
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 {
		t.Fatal("no recorded pods")
	}
	for _, r := range rs {
		var pod v1.Pod
		if err := yaml.Unmarshal([]byte(r.Manifest), &pod); err != nil {
			t.Fatalf("%s: %v", r.Path, err)
		}
		before := pod.DeepCopy()
		uid, err := Of(&pod, File, r.Path, r.Node)
		if err != nil {
			t.Fatalf("%s: %v", r.Path, err)
		}
		if string(uid) != r.UID {
			t.Errorf("%s: UID %s, kubelet's %s", pod.Name, uid, r.UID)
		}
		if pod.Spec.TerminationGracePeriodSeconds == nil && before.Spec.TerminationGracePeriodSeconds != nil || len(pod.Annotations) != len(before.Annotations) || pod.Spec.RestartPolicy != before.Spec.RestartPolicy {
			t.Errorf("%s: Of changed the pod", pod.Name)
		}
		for what, other := range map[string]func() (string, error){
			"another path": func() (string, error) { u, err := Of(&pod, File, r.Path+".x", r.Node); return string(u), err },
			"another node": func() (string, error) { u, err := Of(&pod, File, r.Path, r.Node+"x"); return string(u), err },
			"a URL":        func() (string, error) { u, err := Of(&pod, URL, r.Path, r.Node); return string(u), err },
		} {
			if u, err := other(); err != nil || u == r.UID {
				t.Errorf("%s with %s: UID %s (err %v), want another", pod.Name, what, u, err)
			}
		}
	}
	if _, err := Of(&v1.Pod{}, "nfs", "x", "n"); err == nil {
		t.Error("an unknown source gives a UID")
	}
}
