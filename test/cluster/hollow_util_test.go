package cluster_test

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// hollowDeployment is a Deployment of replicas busybox pods `sleep 3600`
// (grace period 1 s), labelled app=name, on nodes matching nodeSelector
// (nil: any).
func hollowDeployment(name, image string, replicas int32, nodeSelector map[string]string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					NodeSelector:                  nodeSelector,
					TerminationGracePeriodSeconds: ptr.To(int64(1)),
					Containers: []v1.Container{{
						Name: "c", Image: image, Command: []string{"sleep", "3600"},
					}},
				},
			},
		},
	}
}

// podCounts is how many pods labelled app=name exist and how many of them
// are Running and Ready, and on which nodes they run.
func podCounts(ctx context.Context, cs kubernetes.Interface, name string) (total, nRunning int, nodes map[string]int, err error) {
	list, err := cs.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name, ResourceVersion: "0"})
	if err != nil {
		return 0, 0, nil, err
	}
	nodes = map[string]int{}
	for i := range list.Items {
		p := &list.Items[i]
		if running(p) {
			nRunning++
			nodes[p.Spec.NodeName]++
		}
	}
	return len(list.Items), nRunning, nodes, nil
}

// waitPods polls (every interval) until done(total, running) or timeout.
func waitPods(ctx context.Context, cs kubernetes.Interface, name string, timeout, interval time.Duration, done func(total, running int) bool) (map[string]int, error) {
	deadline := time.Now().Add(timeout)
	var total, run int
	for {
		t, r, nodes, err := podCounts(ctx, cs, name)
		if err == nil {
			total, run = t, r
			if done(t, r) {
				return nodes, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("pods of %s: %d exist, %d Running and Ready after %s (last error %v)", name, total, run, timeout, err)
		}
		time.Sleep(interval)
	}
}

// waitNodesReady waits until every node of names is Ready.
func waitNodesReady(ctx context.Context, cs *kubernetes.Clientset, names []string, timeout time.Duration) error {
	return waitNodesReadyOnce(ctx, cs, names, timeout, false)
}

// waitNodesReadyOnce waits until every node of names is Ready at once, or
// with once, until every node has been seen Ready at least once (at scale
// on a loaded machine a few nodes flap while the others start).
func waitNodesReadyOnce(ctx context.Context, cs *kubernetes.Clientset, names []string, timeout time.Duration, once bool) error {
	deadline := time.Now().Add(timeout)
	seen := map[string]bool{}
	for {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		ready := map[string]bool{}
		if err == nil {
			for i := range list.Items {
				ready[list.Items[i].Name] = nodeReady(&list.Items[i]) == v1.ConditionTrue
				if once && ready[list.Items[i].Name] {
					seen[list.Items[i].Name] = true
				}
			}
			if once {
				ready = seen
			}
		}
		missing := 0
		first := ""
		for _, n := range names {
			if !ready[n] {
				if missing == 0 {
					first = n
				}
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d nodes not Ready within %s (first: %s; list error %v)", missing, len(names), timeout, first, err)
		}
		time.Sleep(time.Second)
	}
}
