package userns

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/engine/podspec"
)

// supported is a runtime whose default handler supports user namespaces
// (containerd 2.x's Status).
var supported = &podspec.RuntimeFeatures{Handlers: []podspec.RuntimeHandler{{Name: "", UserNamespaces: true}, {Name: "runc", UserNamespaces: true}, {Name: "old"}}}

func userPod(name string, hostUsers *bool) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")},
		Spec: v1.PodSpec{HostUsers: hostUsers}}
}

// node writes a passwd with the kubelet user and its subordinate ID
// entries (subuid, subgid: file contents; "" leaves the file out) and
// returns a Config over them with its pods under t's directory.
func node(t *testing.T, subuid, subgid string) Config {
	dir := t.TempDir()
	cfg := Config{PodsDir: filepath.Join(dir, "pods"), Passwd: filepath.Join(dir, "passwd"),
		SubUID: filepath.Join(dir, "subuid"), SubGID: filepath.Join(dir, "subgid"), Rand: func(int) int { return 0 }}
	write := func(path, s string) {
		if s == "" {
			return
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(cfg.Passwd, "root:x:0:0:root:/root:/bin/sh\nkubelet:x:999:999::/:/bin/false\n")
	write(cfg.SubUID, subuid)
	write(cfg.SubGID, subgid)
	return cfg
}

func newManager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// hostID is the one host ID the option maps container ID 0 to, after
// checking that the option is a pod namespace of one identical UID and GID
// mapping of per IDs.
func hostID(t *testing.T, ns *runtimeapi.UserNamespace, per uint32) uint32 {
	t.Helper()
	if ns.GetMode() != runtimeapi.NamespaceMode_POD || len(ns.Uids) != 1 || len(ns.Gids) != 1 {
		t.Fatalf("namespace %v: want mode POD with one UID and one GID mapping", ns)
	}
	u, g := ns.Uids[0], ns.Gids[0]
	if u.ContainerId != 0 || u.Length != per || g.HostId != u.HostId || g.ContainerId != 0 || g.Length != per {
		t.Fatalf("mappings uid %v gid %v: want 0 -> the same host ID, %d long", u, g, per)
	}
	return u.HostId
}

// TestNamespaceModes: a pod without hostUsers or with hostUsers true gets
// the node's namespace and no range; hostUsers false on a runtime without
// user namespaces gets kubelet's errors and no range.
func TestNamespaceModes(t *testing.T) {
	m := newManager(t, node(t, "", ""))
	for _, hu := range []*bool{nil, ptr.To(true)} {
		ns, err := m.Namespace(userPod("host", hu), "", nil)
		if err != nil || ns.GetMode() != runtimeapi.NamespaceMode_NODE || len(ns.Uids)+len(ns.Gids) != 0 {
			t.Errorf("hostUsers %v: %v, %v; want mode NODE without mappings", hu, ns, err)
		}
	}
	for _, tc := range []struct {
		name, handler string
		f             *podspec.RuntimeFeatures
		msg           string
	}{
		{"containerd 1.6 (no handlers)", "", &podspec.RuntimeFeatures{NoFeatures: true},
			"can't set `spec.hostUsers: false`, runtime does not support user namespaces"},
		{"Status not read yet", "", nil, "can't set `spec.hostUsers: false`, runtime does not support user namespaces"},
		{"handler without", "old", supported, "can't set `spec.hostUsers: false`, RuntimeClass handler \"old\" does not support user namespaces"},
		{"unknown handler", "gvisor", supported,
			"can't set `spec.hostUsers: false`, RuntimeClass handler \"gvisor\" does not support user namespaces: the handler \"gvisor\" is not known"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Namespace(userPod("p", ptr.To(false)), tc.handler, tc.f)
			if err == nil || err.Error() != tc.msg {
				t.Errorf("error %v, want %q", err, tc.msg)
			}
		})
	}
	if n := m.InUse(); n != 0 {
		t.Errorf("%d ranges in use after refusals, want 0", n)
	}
	if _, err := os.Stat(filepath.Join(m.cfg.PodsDir, "p-uid", RecordFile)); !os.IsNotExist(err) {
		t.Errorf("a refused pod has a record: %v", err)
	}
}

// TestAllocate: each hostUsers false pod gets a range of its own from the
// node's (the kubelet user's subordinate IDs), the same again when asked
// again, recorded in kubelet's format in its pod directory.
func TestAllocate(t *testing.T) {
	cfg := node(t, "kubelet:131072:262144\n", "kubelet:131072:262144\n")
	m := newManager(t, cfg)
	if first, n := m.Range(); first != 131072 || n != 262144 {
		t.Fatalf("range %d+%d, want the kubelet user's 131072+262144", first, n)
	}
	seen := map[uint32]string{}
	for _, name := range []string{"a", "b", "c", "d"} {
		for _, handler := range []string{"", "runc"} {
			ns, err := m.Namespace(userPod(name, ptr.To(false)), handler, supported)
			if err != nil {
				t.Fatal(err)
			}
			h := hostID(t, ns, DefaultIDsPerPod)
			if h < 131072 || h >= 131072+262144 || h%DefaultIDsPerPod != 0 {
				t.Errorf("pod %s: host ID %d outside the node's range or not aligned", name, h)
			}
			if prev, ok := seen[h]; ok && prev != name {
				t.Errorf("pods %s and %s share host ID %d", prev, name, h)
			}
			seen[h] = name
			b, err := os.ReadFile(filepath.Join(cfg.PodsDir, name+"-uid", RecordFile))
			if err != nil {
				t.Fatal(err)
			}
			var rec struct {
				UIDMappings []map[string]uint32 `json:"uidMappings"`
				GIDMappings []map[string]uint32 `json:"gidMappings"`
			}
			if err := json.Unmarshal(b, &rec); err != nil {
				t.Fatal(err)
			}
			want := map[string]uint32{"hostId": h, "containerId": 0, "length": DefaultIDsPerPod}
			if len(rec.UIDMappings) != 1 || !equal(rec.UIDMappings[0], want) || len(rec.GIDMappings) != 1 || !equal(rec.GIDMappings[0], want) {
				t.Errorf("record %s, want uid and gid mappings %v", b, want)
			}
		}
	}
	if len(seen) != 4 || m.InUse() != 4 {
		t.Errorf("%d host IDs for 4 pods, %d in use", len(seen), m.InUse())
	}
}

func equal(a, b map[string]uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestExhaustedAndRelease: a full range refuses the next pod with an error
// naming it; releasing a pod frees its range and removes its record, and
// the next pod gets that range.
func TestExhaustedAndRelease(t *testing.T) {
	cfg := node(t, "999:65536:131072\n", "999:65536:131072\n") // by UID: two ranges
	m := newManager(t, cfg)
	a, err := m.Namespace(userPod("a", ptr.To(false)), "", supported)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Namespace(userPod("b", ptr.To(false)), "", supported); err != nil {
		t.Fatal(err)
	}
	_, err = m.Namespace(userPod("c", ptr.To(false)), "", supported)
	const msg = "create user namespace of pod ns/c: could not find an empty slot to allocate a user namespace (all 2 ranges of 65536 IDs from 65536 are in use)"
	if err == nil || err.Error() != msg {
		t.Fatalf("third pod: %v, want %q", err, msg)
	}
	if _, ok := m.Allocated("c-uid"); ok {
		t.Error("the refused pod holds a range")
	}
	m.Release("a-uid")
	m.Release("never-uid") // no range: a no-op
	if _, err := os.Stat(filepath.Join(cfg.PodsDir, "a-uid", RecordFile)); !os.IsNotExist(err) {
		t.Errorf("released pod's record: %v, want it removed", err)
	}
	c, err := m.Namespace(userPod("c", ptr.To(false)), "", supported)
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if hostID(t, c, DefaultIDsPerPod) != hostID(t, a, DefaultIDsPerPod) {
		t.Errorf("c got %d, want a's freed range %d", hostID(t, c, DefaultIDsPerPod), hostID(t, a, DefaultIDsPerPod))
	}
}

// TestRestart: a new Manager over the same pods directory (speclet
// restarted) holds the recorded ranges: each pod gets its mapping again,
// and a new pod gets another range.
func TestRestart(t *testing.T) {
	cfg := node(t, "kubelet:65536:196608\n", "kubelet:65536:196608\n") // three ranges
	m := newManager(t, cfg)
	before := map[string]uint32{}
	for _, name := range []string{"a", "b"} {
		ns, err := m.Namespace(userPod(name, ptr.To(false)), "", supported)
		if err != nil {
			t.Fatal(err)
		}
		before[name] = hostID(t, ns, DefaultIDsPerPod)
	}
	// A pod directory without a record (a pod on the node's namespace).
	if err := os.MkdirAll(filepath.Join(cfg.PodsDir, "plain-uid"), 0o750); err != nil {
		t.Fatal(err)
	}

	m2 := newManager(t, cfg)
	if m2.InUse() != 2 {
		t.Fatalf("after the restart %d ranges in use, want the 2 recorded", m2.InUse())
	}
	// The third range is the only free one; the search starting at the
	// first range must skip the two recorded ones.
	ns, err := m2.Namespace(userPod("new", ptr.To(false)), "", supported)
	if err != nil {
		t.Fatal(err)
	}
	fresh := hostID(t, ns, DefaultIDsPerPod)
	for name, h := range before {
		if fresh == h {
			t.Errorf("the new pod got %s's recorded range %d", name, h)
		}
		ns, err := m2.Namespace(userPod(name, ptr.To(false)), "", supported)
		if err != nil {
			t.Fatal(err)
		}
		if got := hostID(t, ns, DefaultIDsPerPod); got != h {
			t.Errorf("pod %s after the restart: host ID %d, want %d", name, got, h)
		}
	}
	if m2.InUse() != 3 {
		t.Errorf("%d ranges in use, want 3", m2.InUse())
	}
}

// TestNewRefuses: a record New cannot account for stops it with an error
// naming the file, as kubelet does not start either; so does a node range
// kubelet refuses.
func TestNewRefuses(t *testing.T) {
	cfg := node(t, "kubelet:65536:131072\n", "kubelet:65536:131072\n")
	write := func(uid, s string) string {
		dir := filepath.Join(cfg.PodsDir, uid)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, RecordFile)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rec := `{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}`
	write("a", rec)
	p := write("b", rec)
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "already taken") || !strings.Contains(err.Error(), "/b/userns") {
		t.Errorf("two pods recorded with one range: %v, want an error naming one's record", err)
	}
	if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("an unreadable record: %v, want an error naming %s", err, p)
	}

	for _, tc := range []struct {
		name, subuid, subgid string
		maxPods              int
		want                 string
	}{
		{"mismatched", "kubelet:65536:65536\n", "kubelet:131072:65536\n", 0, "mismatched subuids and subgids"},
		{"two entries", "kubelet:65536:65536\nkubelet:131072:65536\n", "kubelet:65536:65536\n", 0, "2 entries"},
		{"no entry", "other:65536:65536\n", "other:65536:65536\n", 0, "0 entries"},
		{"from 0", "kubelet:0:65536\n", "kubelet:0:65536\n", 0, "must be at least 65536"},
		{"unaligned", "kubelet:70000:65536\n", "kubelet:70000:65536\n", 0, "not a multiple"},
		{"too small for max pods", "kubelet:65536:131072\n", "kubelet:65536:131072\n", 3, "not enough for 3 pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := node(t, tc.subuid, tc.subgid)
			c.MaxPods = tc.maxPods
			if _, err := New(c); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestNodeRangeDefault: without the kubelet user, or without subordinate
// ID files, the node's range is every ID from 65536 on.
func TestNodeRangeDefault(t *testing.T) {
	dir := t.TempDir()
	noUser := filepath.Join(dir, "passwd")
	if err := os.WriteFile(noUser, []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	withUser := node(t, "", "")
	for name, paths := range map[string][3]string{
		"no kubelet user": {noUser, filepath.Join(dir, "subuid"), filepath.Join(dir, "subgid")},
		"no subuid file":  {withUser.Passwd, withUser.SubUID, withUser.SubGID},
	} {
		first, n, err := NodeRange(paths[0], paths[1], paths[2])
		if err != nil || first != 65536 || n != 1<<32-65536 {
			t.Errorf("%s: %d+%d, %v; want 65536+%d", name, first, n, err, uint32(1<<32-65536))
		}
	}
}
