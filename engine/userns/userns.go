// Package userns owns the user namespaces of hostUsers: false pods, as
// kubelet v1.34's pkg/kubelet/userns does them: each such pod gets its own
// range of host IDs (65536 by default), mapped to IDs 0..65535 inside the
// pod, for UIDs and GIDs alike, from the node's range for them: the
// kubelet user's entry in /etc/subuid and /etc/subgid, or, when that user
// or those files are missing, every ID from 65536 on.
//
// A pod's range is recorded in its pod directory (<root>/pods/<uid>/userns,
// kubelet's file and format) before the runtime hears of it, so a restart
// reads the ranges of the pods that still run back (New) and gives each
// the same mapping again; Release forgets a pod's range and its record.
//
// Contracts:
//   - Two pods never hold the same range while both are recorded.
//   - Namespace is the one way to get a range; it refuses a pod whose
//     runtime handler does not support user namespaces with kubelet's
//     message, before anything is allocated or written.
//   - All methods are safe for concurrent use.
package userns

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/podspec"
)

const (
	// DefaultIDsPerPod is the size of a pod's range (kubelet's
	// DefaultKubeletUserNamespacesIDsPerPod); a range's size is a
	// multiple of it.
	DefaultIDsPerPod = 65536
	// KubeletUser is the user whose subordinate IDs are the node's range.
	KubeletUser = "kubelet"
	// RecordFile is the name of a pod's record in its pod directory.
	RecordFile = "userns"

	// defaultFirstID and defaultLength are the node's range when the
	// kubelet user has none: every ID but the first 65536.
	defaultFirstID = 1 << 16
	defaultLength  = 1<<32 - defaultFirstID
)

// Config is where a Manager reads the node's range and keeps its records.
type Config struct {
	// PodsDir holds a directory per pod UID (<root>/pods); a pod's
	// record is <PodsDir>/<uid>/userns. Required.
	PodsDir string
	// Passwd, SubUID and SubGID are the user database and the
	// subordinate ID files; "": /etc/passwd, /etc/subuid, /etc/subgid.
	Passwd, SubUID, SubGID string
	// IDsPerPod is the size of a pod's range; 0: DefaultIDsPerPod.
	IDsPerPod uint32
	// MaxPods is the node's pods capacity: the node's range must hold a
	// range for each (0: not checked).
	MaxPods int
	// Rand picks where the search for a free range starts, in [0, n)
	// (kubelet picks at random); nil: at random.
	Rand func(n int) int
}

// Manager allocates the pods' ranges.
type Manager struct {
	cfg    Config
	first  uint32 // the node's first ID
	off, n int    // the node's range in slots of perPod IDs: [off, off+n)
	perPod uint32
	mu     sync.Mutex
	used   []uint64             // bit i: slot off+i is taken
	count  int                  // slots taken
	usedBy map[types.UID]uint32 // pod -> the first host ID of its range
}

// New reads the node's range (NodeRange), checks it as kubelet's
// MakeUserNsManager does, and records the range of every pod directory
// under PodsDir that holds a record. A record it cannot read or that
// clashes with another is an error naming the file: kubelet then does
// not start either, since a range it cannot account for might be handed
// to a second pod.
func New(cfg Config) (*Manager, error) {
	if cfg.PodsDir == "" {
		return nil, errors.New("user namespaces: PodsDir is required")
	}
	if cfg.IDsPerPod == 0 {
		cfg.IDsPerPod = DefaultIDsPerPod
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.IntN
	}
	first, length, err := NodeRange(cfg.Passwd, cfg.SubUID, cfg.SubGID)
	if err != nil {
		return nil, err
	}
	per := cfg.IDsPerPod
	switch {
	case per%DefaultIDsPerPod != 0:
		return nil, fmt.Errorf("user namespaces: %d IDs per pod is not a multiple of %d", per, DefaultIDsPerPod)
	case first%per != 0:
		return nil, fmt.Errorf("user namespaces: the node's first ID %d is not a multiple of %d", first, per)
	case first < per:
		// Mapping host ID 0 into a pod would hand it the node's root.
		return nil, fmt.Errorf("user namespaces: the node's first ID %d must be at least %d", first, per)
	case length%per != 0:
		return nil, fmt.Errorf("user namespaces: the node's %d IDs are not a multiple of %d", length, per)
	case cfg.MaxPods > 0 && length/per < uint32(cfg.MaxPods):
		return nil, fmt.Errorf("user namespaces: the node's %d IDs from %d are not enough for %d pods of %d IDs", length, first, cfg.MaxPods, per)
	}
	m := &Manager{cfg: cfg, first: first, off: int(first / per), n: int(length / per), perPod: per,
		usedBy: map[types.UID]uint32{}}
	m.used = make([]uint64, (m.n+63)/64)
	entries, err := os.ReadDir(cfg.PodsDir)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("user namespaces: read pods: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		uid := types.UID(e.Name())
		rec, err := m.readRecord(uid)
		if err == nil && rec != nil {
			err = m.take(uid, rec)
		}
		if err != nil {
			return nil, fmt.Errorf("user namespaces: %s: %w", m.recordPath(uid), err)
		}
	}
	return m, nil
}

// Range is the node's range: its first ID and how many IDs it has.
func (m *Manager) Range() (first, length uint32) { return m.first, uint32(m.n) * m.perPod }

// HandlerSupports is whether the runtime handler named handler ("" the
// default) supports user namespaces, as the runtime's last Status said
// (kubelet's HandlerSupportsUserNamespaces): no when the runtime lists no
// handlers (containerd 1.6) or was not asked yet, an error when it lists
// others but not this one.
func HandlerSupports(f *podspec.RuntimeFeatures, handler string) (bool, error) {
	if f == nil || len(f.Handlers) == 0 {
		return false, nil
	}
	for _, h := range f.Handlers {
		if h.Name == handler {
			return h.UserNamespaces, nil
		}
	}
	return false, fmt.Errorf("the handler %q is not known", handler)
}

// Namespace is the user namespace option of the pod's sandbox and
// containers (kubelet's GetOrCreateUserNamespaceMappings): the node's user
// namespace unless the pod sets hostUsers: false; then, if the runtime
// handler supports user namespaces (HandlerSupports of f), a namespace of
// the pod's own with the range recorded for it, a new range allocated and
// recorded for a pod that has none. Without support it is kubelet's error,
// whose text is the event's.
func (m *Manager) Namespace(pod *v1.Pod, handler string, f *podspec.RuntimeFeatures) (*runtimeapi.UserNamespace, error) {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}, nil
	}
	if ok, err := HandlerSupports(f, handler); err != nil || !ok {
		msg := "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
		if handler != "" {
			msg = fmt.Sprintf("can't set `spec.hostUsers: false`, RuntimeClass handler %q does not support user namespaces", handler)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", msg, err)
		}
		return nil, errors.New(msg)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, err := m.readRecord(pod.UID)
	if err == nil && rec != nil {
		err = m.take(pod.UID, rec)
	}
	if err != nil {
		return nil, fmt.Errorf("user namespace of pod %s/%s: %s: %w", pod.Namespace, pod.Name, m.recordPath(pod.UID), err)
	}
	if rec == nil {
		if rec, err = m.allocate(pod); err != nil {
			return nil, err
		}
	}
	return rec.option(), nil
}

// allocate takes a free range for pod, starting the search at a random
// slot (kubelet's random scan), and records it; on failure nothing stays
// taken. m.mu is held.
func (m *Manager) allocate(pod *v1.Pod) (*record, error) {
	if m.count >= m.n {
		first, length := m.Range()
		return nil, fmt.Errorf("create user namespace of pod %s/%s: could not find an empty slot to allocate a user namespace (all %d ranges of %d IDs from %d are in use)",
			pod.Namespace, pod.Name, length/m.perPod, m.perPod, first)
	}
	start := m.cfg.Rand(m.n)
	slot := -1
	for i := 0; i < m.n; i++ {
		if at := (start + i) % m.n; !m.isUsed(at) {
			slot = at
			break
		}
	}
	host := uint32(m.off+slot) * m.perPod
	rec := &record{UIDMappings: []Mapping{{HostID: host, ContainerID: 0, Length: m.perPod}},
		GIDMappings: []Mapping{{HostID: host, ContainerID: 0, Length: m.perPod}}}
	m.set(slot, true)
	m.usedBy[pod.UID] = host
	if err := m.writeRecord(pod.UID, rec); err != nil {
		m.releaseLocked(pod.UID)
		return nil, fmt.Errorf("create user namespace of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return rec, nil
}

// take checks rec as kubelet's parseUserNsFileAndRecord does (one mapping,
// the same for UIDs and GIDs, from ID 0, of the pod's size, inside the
// node's range) and holds its range for uid. m.mu is held, or m is not
// shared yet.
func (m *Manager) take(uid types.UID, rec *record) error {
	if len(rec.UIDMappings) != 1 || len(rec.GIDMappings) != 1 {
		return errors.New("invalid user namespace configuration: want exactly one UID and one GID mapping")
	}
	u := rec.UIDMappings[0]
	if u != rec.GIDMappings[0] {
		return errors.New("invalid user namespace configuration: GID and UID mapping should be identical")
	}
	if u.ContainerID != 0 {
		return errors.New("invalid user namespace configuration: UID 0 must be mapped")
	}
	if u.Length != m.perPod {
		return fmt.Errorf("wrong user namespace length %d, want %d", u.Length, m.perPod)
	}
	if u.HostID%m.perPod != 0 {
		return fmt.Errorf("wrong user namespace offset %d", u.HostID)
	}
	slot := int(u.HostID/m.perPod) - m.off
	if slot < 0 || slot >= m.n {
		return fmt.Errorf("id %d is out of the node's range", u.HostID)
	}
	if prev, ok := m.usedBy[uid]; ok {
		if prev != u.HostID {
			return fmt.Errorf("different user namespace range already used by pod %q", uid)
		}
		return nil
	}
	if m.isUsed(slot) {
		return fmt.Errorf("range from %d recorded for pod %q is already taken", u.HostID, uid)
	}
	m.set(slot, true)
	m.usedBy[uid] = u.HostID
	return nil
}

// Release forgets the range of pod uid and removes its record (kubelet
// releases it when the pod has terminated); a pod without one is a no-op.
func (m *Manager) Release(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.releaseLocked(uid)
}

func (m *Manager) releaseLocked(uid types.UID) {
	host, ok := m.usedBy[uid]
	if !ok {
		return
	}
	delete(m.usedBy, uid)
	_ = os.Remove(m.recordPath(uid))
	m.set(int(host/m.perPod)-m.off, false)
}

// Allocated is the first host ID of pod uid's range, if it holds one.
func (m *Manager) Allocated(uid types.UID) (uint32, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	host, ok := m.usedBy[uid]
	return host, ok
}

// InUse is how many ranges are held.
func (m *Manager) InUse() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.count
}

func (m *Manager) isUsed(slot int) bool { return m.used[slot/64]&(1<<(slot%64)) != 0 }

func (m *Manager) set(slot int, on bool) {
	if m.isUsed(slot) == on {
		return
	}
	if on {
		m.used[slot/64] |= 1 << (slot % 64)
		m.count++
	} else {
		m.used[slot/64] &^= 1 << (slot % 64)
		m.count--
	}
}
