package cluster_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/test/cluster"
)

// TestKubeletAPIAuthorizesByDefault: a node started with --kubeconfig and no
// --authorization-mode (speclet --runtime=sim under a real kube-apiserver)
// refuses a service account's token on its kubelet API port with 403 for
// logs, exec and /pods, while the API server, with its
// --kubelet-client-certificate, reads a pod's logs on the same node.
// Lighter than TestCluster: no containerd, no scheduler.
func TestKubeletAPIAuthorizesByDefault(t *testing.T) {
	c := cluster.ForTest(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := cluster.BuildSpeclet(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.StartNode(ctx, cluster.NodeOptions{Name: "node-authz", Bin: bin, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("log of node-authz:\n%s", n.LogTail(40))
		}
		n.Stop()
	}()
	if !strings.Contains(n.LogTail(200), "authorization=Webhook") {
		t.Errorf("the start log does not say authorization=Webhook:\n%s", n.LogTail(40))
	}
	if err := c.EnsureNamespace(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "intruder", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, r := range []struct{ method, path string }{
		{"GET", "/containerLogs/default/any/main"},
		{"POST", "/exec/default/any/main?command=id&stdout=1"},
		{"GET", "/pods"},
	} {
		req, _ := http.NewRequest(r.method, n.API+r.path, nil)
		req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "system:serviceaccount:default:intruder") {
			t.Errorf("%s %s with a service account's token: %d %q, want 403 naming the service account", r.method, r.path, resp.StatusCode, body)
		}
	}
	// The API server's own identity: the logs of a pod on the node through
	// kube-apiserver (its kubelet client certificate, authorized by
	// SubjectAccessReview). The simulated runtime writes no log file: an
	// empty log, not a 403.
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "talk", Namespace: "default"}, Spec: v1.PodSpec{NodeName: "node-authz",
		AutomountServiceAccountToken: ptr.To(false), Containers: []v1.Container{{Name: "main", Image: "busybox:latest"}}}}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server reaches the node at the port its Node status names.
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		nd, err := admin.CoreV1().Nodes().Get(ctx, "node-authz", metav1.GetOptions{})
		if err == nil && nd.Status.DaemonEndpoints.KubeletEndpoint.Port != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node node-authz has no kubelet endpoint in its status within 90 s: %v", err)
		}
	}
	var logErr error
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "talk", metav1.GetOptions{})
		if err == nil && p.Status.Phase == v1.PodRunning {
			_, logErr = admin.CoreV1().Pods("default").GetLogs("talk", &v1.PodLogOptions{Container: "main"}).DoRaw(ctx)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod talk not Running within 90 s: %v %+v", err, p.Status)
		}
	}
	if logErr != nil {
		t.Errorf("logs of talk through the API server (its kubelet client identity): %v, want them", logErr)
	}
}
