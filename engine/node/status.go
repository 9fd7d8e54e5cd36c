// The node's status and its Lease.

package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"
)

// updateStatus computes the Node's status and writes it when it changed
// or ReportPeriod passed; it reports whether it wrote.
func (n *Node) updateStatus(ctx context.Context) (bool, error) {
	nodes := n.cfg.Client.CoreV1().Nodes()
	// The API server's cache, as kubelet reads it: a write that changes
	// nothing is skipped, and a condition others set (the node lifecycle
	// controller's Unknown) is seen.
	cur, err := nodes.Get(ctx, n.cfg.Name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		// The cache may trail the Create that registration just made.
		cur, err = nodes.Get(ctx, n.cfg.Name, metav1.GetOptions{})
	}
	if err != nil {
		return false, fmt.Errorf("get node: %w", err)
	}
	prev := cur.Status.Conditions
	mine := n.status(ctx, prev)
	next := cur.DeepCopy()
	next.Status.Capacity, next.Status.Allocatable = mine.Capacity, mine.Allocatable
	next.Status.Addresses, next.Status.DaemonEndpoints = mine.Addresses, mine.DaemonEndpoints
	next.Status.NodeInfo, next.Status.Conditions = mine.NodeInfo, mine.Conditions
	if n.cfg.RuntimeFeatures != nil {
		next.Status.RuntimeHandlers = mine.RuntimeHandlers
		if mine.Features != nil {
			next.Status.Features = mine.Features
		}
	}
	now := n.cfg.Now()
	if !statusChanged(cur.Status, next.Status) && !n.reported.IsZero() && now.Sub(n.reported) < n.cfg.ReportPeriod {
		n.mu.Lock()
		n.uid, n.last = cur.UID, cur
		n.mu.Unlock()
		return false, nil
	}
	patch, err := nodeStatusPatch(cur, next)
	if err != nil {
		return false, err
	}
	got, err := nodes.Patch(ctx, n.cfg.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return false, fmt.Errorf("write node status: %w", err)
	}
	n.reported = now
	if n.cfg.Event != nil {
		for _, reason := range transitionEvents(prev, next.Status.Conditions) {
			n.cfg.Event(v1.EventTypeNormal, reason, fmt.Sprintf("Node %s status is now: %s", n.cfg.Name, reason))
		}
	}
	n.mu.Lock()
	n.uid, n.last = got.UID, got
	n.mu.Unlock()
	return true, nil
}

// statusChanged is kubelet's nodeStatusHasChanged: anything but the
// conditions' heartbeat times differs.
func statusChanged(old, next v1.NodeStatus) bool {
	strip := func(s v1.NodeStatus) v1.NodeStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return s
	}
	return !apiequality.Semantic.DeepEqual(strip(old), strip(next))
}

// nodeStatusPatch is kubelet's node status patch: the two-way strategic
// merge patch from old to next. next is old with another status, so the
// patch holds the status only (no resourceVersion: it does not fail on a
// Node changed since).
func nodeStatusPatch(old, next *v1.Node) ([]byte, error) {
	oldJSON, err := json.Marshal(old)
	if err != nil {
		return nil, fmt.Errorf("marshal node: %w", err)
	}
	nextJSON, err := json.Marshal(next)
	if err != nil {
		return nil, fmt.Errorf("marshal node: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, nextJSON, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("make node status patch: %w", err)
	}
	return patch, nil
}

func (n *Node) leaseLoop(ctx context.Context) {
	t := time.NewTicker(n.cfg.LeasePeriod)
	defer t.Stop()
	for {
		if err := n.renewLease(ctx); err != nil {
			if ctx.Err() == nil {
				n.leaseFails.Fail(err, "node", n.cfg.Name)
			}
		} else {
			n.leaseFails.OK()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// renewLease updates the Lease last written (one request); after a
// failure, or the first time, it reads it (creating it when missing).
func (n *Node) renewLease(ctx context.Context) error {
	leases := n.cfg.Client.CoordinationV1().Leases(LeaseNamespace)
	now := metav1.NewMicroTime(n.cfg.Now())
	l := n.lease
	n.lease = nil // kept again once written
	if l == nil {
		got, err := leases.Get(ctx, n.cfg.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			got = &coordv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: n.cfg.Name, Namespace: LeaseNamespace, OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: n.cfg.Name, UID: n.UID(),
				}}},
				Spec: coordv1.LeaseSpec{
					HolderIdentity:       ptr.To(n.cfg.Name),
					LeaseDurationSeconds: ptr.To(int32(n.cfg.LeaseDuration / time.Second)),
					RenewTime:            &now,
				},
			}
			created, err := leases.Create(ctx, got, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("create lease: %w", err)
			}
			n.lease = created
			return nil
		}
		if err != nil {
			return fmt.Errorf("get lease: %w", err)
		}
		l = got
	}
	l = l.DeepCopy()
	l.Spec.HolderIdentity = ptr.To(n.cfg.Name)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(n.cfg.LeaseDuration / time.Second))
	l.Spec.RenewTime = &now
	got, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update lease: %w", err)
	}
	n.lease = got
	return nil
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func osImage() string {
	f, err := os.Open("/etc/os-release")
	if err != nil {
		return runtime.GOOS
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return runtime.GOOS
}

func diskSpace(dir string) (total, avail uint64, ok bool) {
	var st syscall.Statfs_t
	if dir == "" || syscall.Statfs(dir, &st) != nil {
		return 0, 0, false
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), true
}
