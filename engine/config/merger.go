package config

import (
	"context"
	"log/slog"
	"reflect"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Merger turns complete snapshots from each source into incremental
// operations on one channel, as kubelet's PodConfig (podStorage) does:
// for one snapshot it sends REMOVE, then ADD, then UPDATE, then DELETE, then
// RECONCILE, each only when it has pods, except that the first snapshot of a
// source always yields an ADD (possibly empty) so the engine knows the source
// has spoken.
type Merger struct {
	mu      sync.Mutex // held while computing and sending, so operations keep snapshot order
	pods    map[string]map[types.UID]*v1.Pod
	updates chan PodUpdate
	now     func() time.Time
	log     *slog.Logger
}

// NewMerger returns a Merger whose Updates channel buffers 50 operations,
// like kubelet's. A nil log means slog.Default().
func NewMerger(log *slog.Logger) *Merger {
	if log == nil {
		log = slog.Default()
	}
	return &Merger{
		pods:    map[string]map[types.UID]*v1.Pod{},
		updates: make(chan PodUpdate, 50),
		now:     time.Now,
		log:     log,
	}
}

// Updates is the channel the engine reads.
func (m *Merger) Updates() <-chan PodUpdate { return m.updates }

// Set replaces the snapshot of source with pods and sends the operations that
// take the engine from the previous snapshot to this one. It blocks while the
// channel is full and returns ctx.Err() if ctx ends first; the snapshot is
// then recorded only in part, and the next Set repairs the difference. Pods
// sent are copies; the caller keeps ownership of pods.
func (m *Merger) Set(ctx context.Context, source string, pods []*v1.Pod) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, seen := m.pods[source]
	if !seen {
		old = map[types.UID]*v1.Pod{}
	}
	next := make(map[types.UID]*v1.Pod, len(pods))
	var adds, updates, deletes, reconciles, removes []*v1.Pod
	for _, p := range pods {
		if _, dup := next[p.UID]; dup {
			m.log.Error("pod skipped: its UID is already used by another pod of the source", "source", source, "pod", p.Namespace+"/"+p.Name, "uid", p.UID)
			continue
		}
		prev, ok := old[p.UID]
		if !ok {
			p = p.DeepCopy()
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			if p.Annotations[AnnotationSeen] == "" {
				p.Annotations[AnnotationSeen] = m.now().UTC().Format(time.RFC3339Nano)
			}
			next[p.UID] = p
			adds = append(adds, p)
			continue
		}
		switch {
		case specDiffers(prev, p):
			q := p.DeepCopy()
			keepSeen(q, prev)
			next[p.UID] = q
			if q.DeletionTimestamp != nil && prev.DeletionTimestamp == nil {
				deletes = append(deletes, q)
			} else {
				updates = append(updates, q)
			}
		case !reflect.DeepEqual(prev.Status, p.Status):
			q := prev.DeepCopy()
			q.Status = *p.Status.DeepCopy()
			next[p.UID] = q
			reconciles = append(reconciles, q)
		default:
			next[p.UID] = prev
		}
	}
	for uid, p := range old {
		if _, ok := next[uid]; !ok {
			removes = append(removes, p)
		}
	}
	m.pods[source] = next

	first := !seen && len(updates) == 0 && len(deletes) == 0
	batches := []struct {
		op     Op
		pods   []*v1.Pod
		always bool
	}{
		{OpRemove, removes, false},
		{OpAdd, adds, first},
		{OpUpdate, updates, false},
		{OpDelete, deletes, false},
		{OpReconcile, reconciles, false},
	}
	for i, bt := range batches {
		if len(bt.pods) == 0 && !bt.always {
			continue
		}
		SortPods(bt.pods)
		u := PodUpdate{Op: bt.op, Source: source, Pods: make([]*v1.Pod, len(bt.pods))}
		for j, p := range bt.pods {
			u.Pods[j] = p.DeepCopy()
		}
		select {
		case m.updates <- u:
		case <-ctx.Done():
			// Forget what was not delivered, so that the next snapshot
			// sends it again.
			for _, rest := range batches[i:] {
				for _, p := range rest.pods {
					if prev, ok := old[p.UID]; ok {
						m.pods[source][p.UID] = prev
					} else {
						delete(m.pods[source], p.UID)
					}
				}
			}
			if !seen && i <= 1 {
				delete(m.pods, source) // the source's first ADD is still owed
			}
			return ctx.Err()
		}
	}
	return nil
}

// Pods returns copies of the current pods of source, sorted by namespace and name.
func (m *Merger) Pods(source string) []*v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*v1.Pod, 0, len(m.pods[source]))
	for _, p := range m.pods[source] {
		out = append(out, p.DeepCopy())
	}
	SortPods(out)
	return out
}

// SortPods orders pods by namespace, name, then UID: the one order every
// pod list the engine and its sources hand out is in.
func SortPods(ps []*v1.Pod) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Namespace != ps[j].Namespace {
			return ps[i].Namespace < ps[j].Namespace
		}
		if ps[i].Name != ps[j].Name {
			return ps[i].Name < ps[j].Name
		}
		return ps[i].UID < ps[j].UID
	})
}

// specDiffers reports a change the engine must act on: spec, labels,
// annotations (other than config.seen) or deletion, as kubelet's
// podsDifferSemantically does.
func specDiffers(a, b *v1.Pod) bool {
	return !reflect.DeepEqual(a.Spec, b.Spec) ||
		!reflect.DeepEqual(a.Labels, b.Labels) ||
		!reflect.DeepEqual(a.DeletionTimestamp, b.DeletionTimestamp) ||
		!reflect.DeepEqual(a.DeletionGracePeriodSeconds, b.DeletionGracePeriodSeconds) ||
		!annotationsEqual(a.Annotations, b.Annotations)
}

func annotationsEqual(a, b map[string]string) bool {
	n := 0
	for k, v := range a {
		if k == AnnotationSeen {
			continue
		}
		n++
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	for k := range b {
		if k != AnnotationSeen {
			n--
		}
	}
	return n == 0
}

func keepSeen(p, prev *v1.Pod) {
	if s := prev.Annotations[AnnotationSeen]; s != "" {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[AnnotationSeen] = s
	}
}
