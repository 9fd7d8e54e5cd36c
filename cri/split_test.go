package cri_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
)

// TestListSplitBySandbox: 250 sandboxes of 24 containers with 3 KiB of
// labels and annotations each make a ListContainers (and
// ListContainerStats) reply of about 19 MiB, over the 16 MiB both ends of
// the CRI allow. The client still returns every container: the whole call
// fails with ResourceExhausted and the client asks once per sandbox; later
// calls go per sandbox at once, and no reply the runtime answers is then
// over the limit. When the records shrink back, the client lists whole again.
func TestListSplitBySandbox(t *testing.T) {
	const pods, perPod = 250, 24
	srv := simServer(t)
	ctx := context.Background()
	pad := strings.Repeat("x", 3<<10)
	var ids []string
	for p := range pods {
		name := fmt.Sprintf("pod-%03d", p)
		sc := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "split", Uid: "uid-" + name},
			Labels: map[string]string{"speclet.io/pod-uid": "uid-" + name}}
		sb, err := srv.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sc})
		if err != nil {
			t.Fatal(err)
		}
		for c := range perPod {
			r, err := srv.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sc,
				Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: fmt.Sprintf("c%02d", c)},
					Image:       &runtimeapi.ImageSpec{Image: "busybox:latest"},
					Labels:      map[string]string{"speclet.io/pod-uid": "uid-" + name},
					Annotations: map[string]string{"example.com/pad": pad}}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.ContainerId)
		}
	}
	rt, err := cri.Dial(ctx, srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()

	check := func(what string) {
		t.Helper()
		cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"speclet.io/pod-uid": "uid-pod-007"}})
		if err != nil || len(cs) != perPod {
			t.Fatalf("%s: ListContainers of one pod by label: %d containers, %v; want %d", what, len(cs), err, perPod)
		}
		cs, err = rt.ListContainers(ctx, nil)
		if err != nil {
			t.Fatalf("%s: ListContainers: %v", what, err)
		}
		st, err := rt.ListContainerStats(ctx, nil)
		if err != nil {
			t.Fatalf("%s: ListContainerStats: %v", what, err)
		}
		seen := map[string]bool{}
		for _, c := range cs {
			seen[c.Id] = true
		}
		for _, s := range st {
			if !seen[s.GetAttributes().GetId()] {
				t.Errorf("%s: stats of %s, not listed", what, s.GetAttributes().GetId())
			}
		}
		if len(seen) != len(ids) || len(st) != len(ids) {
			t.Fatalf("%s: %d containers and %d stats listed, want %d", what, len(seen), len(st), len(ids))
		}
		for _, id := range ids {
			if !seen[id] {
				t.Fatalf("%s: container %s not listed", what, id)
			}
		}
	}
	check("first calls")
	if n := srv.Runtime.LargestReply("ListContainers"); n <= cri.MaxMsgSize {
		t.Fatalf("the whole ListContainers reply is %d bytes, not over the %d limit: the test proves nothing", n, cri.MaxMsgSize)
	}
	srv.Runtime.ResetLargestReplies()
	calls := srv.Runtime.Calls("ListContainers")
	check("split calls")
	for _, m := range []string{"ListContainers", "ListContainerStats", "ListPodSandbox"} {
		if n := srv.Runtime.LargestReply(m); n == 0 || n > cri.MaxMsgSize {
			t.Errorf("largest %s reply once split: %d bytes, want 1..%d", m, n, cri.MaxMsgSize)
		}
	}
	if n := srv.Runtime.Calls("ListContainers") - calls; n != 1+pods {
		t.Errorf("split ListContainers made %d calls, want %d (one pod's by label, then one per sandbox, no whole call)", n, 1+pods)
	}

	// Most containers go: the next split pass totals under half the
	// limit, and the call after it is whole again.
	for _, id := range ids[pods*perPod/10:] {
		if _, err := srv.Runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
			t.Fatal(err)
		}
	}
	ids = ids[:pods*perPod/10]
	check("shrunk, split")
	calls = srv.Runtime.Calls("ListContainers")
	check("shrunk, whole")
	if n := srv.Runtime.Calls("ListContainers") - calls; n != 2 {
		t.Errorf("after the records shrank ListContainers made %d calls, want 2 (whole again)", n)
	}
}
