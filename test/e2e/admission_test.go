package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestUnsupportedFieldRefused: a static pod using a field speclet does not
// implement (hostnameOverride) is refused at admission:
// phase Failed, reason FieldNotSupported and a message naming the field;
// nothing of it reaches the runtime, and a pod beside it runs.
func TestUnsupportedFieldRefused(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "override")
	bad := podSpec{name: "override", grace: 1, containers: []ctr{{name: "main", command: handlesTERM}}}.yaml(c)
	bad = strings.Replace(bad, "spec:\n", "spec:\n  hostnameOverride: other\n", 1)
	d.writeManifest(t, "override", bad)
	d.writeManifest(t, "beside", podSpec{name: "beside", grace: 1, containers: []ctr{{name: "main", command: handlesTERM}}}.yaml(c))
	p := d.waitPod(t, "override", time.Minute, "Failed", func(p *v1.Pod) bool { return p != nil && p.Status.Phase == v1.PodFailed })
	const msg = "Pod was rejected: Pod uses what this node does not support: spec.hostnameOverride: hostname overrides are not supported"
	if p.Status.Reason != "FieldNotSupported" || p.Status.Message != msg {
		t.Errorf("refused pod: reason %q message %q\nwant FieldNotSupported: %s", p.Status.Reason, p.Status.Message, msg)
	}
	d.waitPod(t, "beside", 2*time.Minute, "Running", isRunning)
	if ctrs, sbs := runtimeObjects(t, "override"); len(ctrs)+len(sbs) != 0 {
		t.Errorf("the refused pod reached the runtime: %d containers, %d sandboxes", len(ctrs), len(sbs))
	}
}
