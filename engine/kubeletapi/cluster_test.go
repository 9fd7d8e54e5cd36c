package kubeletapi_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/kubeletapi"
	"github.com/speclet/speclet/engine/servingcert"
	"github.com/speclet/speclet/test/cluster"
)

// TestCluster runs the kubelet API behind a real kube-apiserver: the API
// server reaches it with its --kubelet-client-certificate (signed by the
// cluster CA, which the node trusts as its client CA) for `kubectl logs`,
// `exec`, `attach` and `port-forward`; bearer tokens are checked through
// TokenReview and requests through SubjectAccessReview, with the node's own
// credentials, as kubelet with --authorization-mode=Webhook.
//
// The pods are API objects bound to node-a, fed to the engine as the API
// source would; the Node object is written by the test (with InternalIP
// 127.0.0.1 and the API's port), and the pods' phase set to Running so
// that kubectl port-forward accepts them.
//
// The node's serving certificate comes from the cluster, as with
// --rotate-server-certificates: a CertificateSigningRequest for the
// kubernetes.io/kubelet-serving signer, approved by the test as an
// administrator would, signed by kube-controller-manager; the API server
// verifies it (--kubelet-certificate-authority) on every proxied request.
// The last subtest moves the manager's clock to the renewal deadline: a new
// request, approved and signed, replaces the certificate without a restart.
func TestCluster(t *testing.T) {
	c := cluster.ForTest(t, cluster.Options{ControllerManager: true, VerifyKubelets: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	admin, nodeCS, rev, caPEM := nodeA(t, c)
	clock := clocktesting.NewFakeClock(time.Now())
	var certs *servingcert.Manager
	var pki string
	n := startNodeServing(t, rev, rev, func(api *kubeletapi.API, root string) (*tls.Config, []byte) {
		var err error
		pki = filepath.Join(root, "pki")
		certs, err = servingcert.New(servingcert.Config{Client: nodeCS, NodeName: "node-a", DNSNames: []string{"node-a"},
			IPs: []net.IP{net.ParseIP("127.0.0.1")}, Dir: pki, Clock: clock, Rand: func() float64 { return 0.5 }})
		if err != nil {
			t.Fatal(err)
		}
		mctx, mcancel := context.WithCancel(context.Background())
		mdone := make(chan struct{})
		go func() { certs.Run(mctx); close(mdone) }()
		t.Cleanup(func() { mcancel(); <-mdone })
		return api.TLSConfigFunc(certs.GetCertificate), caPEM
	}, caPEM)
	ca := csrAdmin{ctx: ctx, admin: admin, n: n, caPEM: caPEM}
	approve, served := ca.approve, ca.served
	approve(t)
	n.waitFor(t, "the issued certificate served", func() bool { return certs.Current() != nil })
	first := served(t)
	if first.Subject.CommonName != "system:node:node-a" || first.Issuer.CommonName != "speclet-test-ca" {
		t.Errorf("served certificate %s issued by %s, want system:node:node-a by the cluster CA", first.Subject, first.Issuer)
	}
	if stored, err := tls.LoadX509KeyPair(filepath.Join(pki, servingcert.CurrentFile), filepath.Join(pki, servingcert.CurrentFile)); err != nil ||
		stored.Leaf.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Errorf("%s: %v; want the served certificate and its key", servingcert.CurrentFile, err)
	}
	port := strings.TrimPrefix(n.base[strings.LastIndex(n.base, ":"):], ":")
	var kport int32
	fmt.Sscan(port, &kport)

	registerNode(ctx, t, admin, "node-a", kport, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "127.0.0.1"}, v1.NodeAddress{Type: v1.NodeHostName, Address: "node-a"})

	httpPort := harness.FreePort(t)
	specs := []*v1.Pod{
		n.pod("ticker", v1.Container{Name: "main", Command: []string{"sh", "-c", `i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done`}}),
		n.pod("crasher", v1.Container{Name: "main", Command: []string{"sh", "-c", `echo run at $(cat /proc/uptime); sleep 1; exit 1`}}),
		n.pod("web", v1.Container{Name: "httpd", Command: []string{"sh", "-c",
			fmt.Sprintf(`mkdir -p /www && echo hello-from-httpd > /www/index.html && exec httpd -f -p 127.0.0.1:%d -h /www`, httpPort)}}),
		n.pod("chat", v1.Container{Name: "main", Stdin: true, Command: []string{"sh", "-c", `while read l; do echo got:$l; done`}}),
	}
	var bound []*v1.Pod
	for _, p := range specs {
		p.UID = ""
		p.Annotations = nil
		p.Spec.NodeName = "node-a"
		no := false
		p.Spec.AutomountServiceAccountToken = &no // speclet has no projected volumes yet
		created, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Phase = v1.PodRunning
		if created, err = admin.CoreV1().Pods("default").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		fed := created.DeepCopy()
		fed.Annotations = map[string]string{config.AnnotationSource: config.SourceAPI}
		bound = append(bound, fed)
	}
	n.updates <- config.PodUpdate{Op: config.OpAdd, Pods: bound, Source: config.SourceAPI}
	n.waitFor(t, "pods Running, crasher restarted", func() bool {
		return n.allRunning("ticker", "web", "chat") && n.restarts("crasher") >= 1
	})

	kubectl := func(stdin io.Reader, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl"), append([]string{"--kubeconfig", c.AdminKubeconfig(), "-n", "default"}, args...)...)
		cmd.Stdin = stdin
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, errb.String())
		}
		return out.String(), err
	}

	t.Run("kubectl logs", func(t *testing.T) {
		n.waitFor(t, "three ticks", func() bool { out, _ := kubectl(nil, "logs", "ticker"); return strings.Contains(out, "tick 2\n") })
		out, err := kubectl(nil, "logs", "ticker", "--tail=1")
		if err != nil || !strings.HasPrefix(out, "tick ") || strings.Count(out, "\n") != 1 {
			t.Errorf("logs --tail=1: %q %v", out, err)
		}
		out, err = kubectl(nil, "logs", "crasher", "--previous")
		if err != nil || !strings.HasPrefix(out, "run at ") {
			t.Errorf("logs --previous: %q %v", out, err)
		}
		// -f: the stream goes on; read three lines, then stop kubectl
		fctx, fcancel := context.WithCancel(ctx)
		defer fcancel()
		cmd := exec.CommandContext(fctx, filepath.Join(c.BinDir, "kubectl"), "--kubeconfig", c.AdminKubeconfig(), "-n", "default", "logs", "-f", "--tail=1", "ticker")
		pipe, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 0, 256)
		chunk := make([]byte, 64)
		for strings.Count(string(buf), "\n") < 3 {
			k, err := pipe.Read(chunk)
			if err != nil {
				t.Fatalf("logs -f: %v after %q", err, buf)
			}
			buf = append(buf, chunk[:k]...)
		}
		fcancel()
		cmd.Wait()
	})

	t.Run("kubectl exec", func(t *testing.T) {
		out, err := kubectl(nil, "exec", "ticker", "--", "sh", "-c", "echo hi")
		if err != nil || out != "hi\n" {
			t.Errorf("exec echo hi: %q %v", out, err)
		}
		out, err = kubectl(strings.NewReader("echo from-stdin\nexit\n"), "exec", "-i", "ticker", "--", "sh")
		if err != nil || out != "from-stdin\n" {
			t.Errorf("exec -i: %q %v", out, err)
		}
	})

	t.Run("kubectl attach", func(t *testing.T) {
		pr, pw := io.Pipe()
		actx, acancel := context.WithCancel(ctx)
		defer acancel()
		cmd := exec.CommandContext(actx, filepath.Join(c.BinDir, "kubectl"), "--kubeconfig", c.AdminKubeconfig(), "-n", "default", "attach", "-i", "chat")
		cmd.Stdin = pr
		out := &lineWriter{lines: make(chan string, 10)}
		cmd.Stdout = out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		defer cmd.Wait()
		defer pw.Close()
		defer acancel()
		go func() {
			for actx.Err() == nil {
				pw.Write([]byte("ping\n"))
				time.Sleep(500 * time.Millisecond)
			}
		}()
		select {
		case l := <-out.lines:
			if !strings.HasPrefix(l, "got:ping") {
				t.Errorf("attach: %q", l)
			}
		case <-time.After(time.Minute):
			t.Errorf("attach: no answer; kubectl: %s", errb.String())
		}
	})

	t.Run("kubectl port-forward", func(t *testing.T) {
		local := harness.FreePort(t)
		pctx, pcancel := context.WithCancel(ctx)
		defer pcancel()
		cmd := exec.CommandContext(pctx, filepath.Join(c.BinDir, "kubectl"), "--kubeconfig", c.AdminKubeconfig(), "-n", "default",
			"port-forward", "--address", "127.0.0.1", "pod/web", fmt.Sprintf("%d:%d", local, httpPort))
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer pcancel()
		if body := n.waitIndex(t, "httpd answers through kubectl port-forward", local); body != "hello-from-httpd\n" {
			t.Errorf("port-forward: %q (kubectl: %s)", body, errb.String())
		}
	})

	t.Run("bearer tokens", func(t *testing.T) {
		if err := c.EnsureNamespace(ctx, "default"); err != nil {
			t.Fatal(err)
		}
		for _, sa := range []string{"reader", "nobody"} {
			if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		token := func(sa string) string {
			tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa, &authnv1.TokenRequest{}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return tr.Status.Token
		}
		if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "node-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/proxy", "nodes/stats"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "node-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "node-reader"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: "default"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		plain := n.httpClient(t, "")
		call := func(tok, path string) (int, string) {
			req, _ := http.NewRequest("GET", n.base+path, nil)
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := plain.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		reader, nobody := token("reader"), token("nobody")
		var code int
		var body string
		n.waitFor(t, "RBAC for reader", func() bool { code, body = call(reader, "/pods"); return code == 200 })
		if !strings.Contains(body, `"name":"ticker"`) {
			t.Errorf("/pods with reader's token: %q", body)
		}
		if code, body = call(reader, "/containerLogs/default/ticker/main?tailLines=1"); code != 200 || !strings.HasPrefix(body, "tick ") {
			t.Errorf("logs with reader's token: %d %q", code, body)
		}
		for _, tc := range []struct {
			tok, path string
			code      int
			body      string
		}{
			{"", "/pods", 401, "Unauthorized"},
			{"not-a-token", "/pods", 401, "Unauthorized"},
			{nobody, "/pods", 403, "user=system:serviceaccount:default:nobody"},
			{nobody, "/containerLogs/default/ticker/main", 403, "proxy"},
			{reader, "/metrics", 403, "metrics"},
			{reader, "/containerLogs/default/elsewhere/main", 404, "not found on node"},
		} {
			if code, body := call(tc.tok, tc.path); code != tc.code || !strings.Contains(body, tc.body) {
				t.Errorf("GET %s: %d %q, want %d with %q", tc.path, code, body, tc.code, tc.body)
			}
		}
	})

	t.Run("the API server verifies the serving certificate", func(t *testing.T) {
		// the same API behind a self-signed certificate: with the Node's
		// port pointing there, kube-apiserver refuses to proxy
		cert, _, err := kubeletapi.ServingCert("", "", t.TempDir(), "node-a", []net.IP{net.ParseIP("127.0.0.1")}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: n.api, TLSConfig: n.api.TLSConfig(cert)}
		go srv.Serve(tls.NewListener(l, srv.TLSConfig))
		defer srv.Close()
		setPort := func(port int32) {
			t.Helper()
			nd, err := admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			nd.Status.DaemonEndpoints.KubeletEndpoint.Port = port
			if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, nd, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		setPort(int32(l.Addr().(*net.TCPAddr).Port))
		var lastErr error
		n.waitFor(t, "kubectl logs refused for a certificate the cluster CA did not sign", func() bool {
			_, lastErr = kubectl(nil, "logs", "ticker", "--tail=1")
			return lastErr != nil && strings.Contains(lastErr.Error(), "x509")
		})
		setPort(kport)
		n.waitFor(t, "kubectl logs back on the issued certificate", func() bool {
			out, err := kubectl(nil, "logs", "ticker", "--tail=1")
			return err == nil && strings.HasPrefix(out, "tick ")
		})
	})

	t.Run("serving certificate renewal", func(t *testing.T) {
		deadline := certs.Deadline()
		lifetime := first.NotAfter.Sub(first.NotBefore)
		if want := first.NotBefore.Add(lifetime * 8 / 10); deadline.Sub(want).Abs() > time.Second {
			t.Errorf("renewal at %s, want 80%% of the lifetime: %s", deadline, want)
		}
		n.waitFor(t, "the manager waiting for the renewal deadline", clock.HasWaiters)
		clock.SetTime(deadline)
		approve(t)
		n.waitFor(t, "the renewed certificate served", func() bool { return served(t).SerialNumber.Cmp(first.SerialNumber) != 0 })
		// the API server verifies the new one as it did the first
		out, err := kubectl(nil, "logs", "ticker", "--tail=1")
		if err != nil || !strings.HasPrefix(out, "tick ") {
			t.Errorf("logs after the renewal: %q %v", out, err)
		}
		link, err := os.Readlink(filepath.Join(pki, servingcert.CurrentFile))
		if want := "kubelet-server-" + deadline.Format("2006-01-02-15-04-05") + ".pem"; err != nil || link != want {
			t.Errorf("%s -> %q (%v), want %s", servingcert.CurrentFile, link, err, want)
		}
	})
}

// nodeA is what the speclet node node-a of cluster c works with: the
// administrator's client, node-a's own client, a reviewer of tokens and
// access over it, and the cluster CA's PEM.
func nodeA(tb testing.TB, c *cluster.Cluster) (admin, nodeCS *kubernetes.Clientset, rev *kubeletapi.APIReviewer, caPEM []byte) {
	tb.Helper()
	admin, err := c.AdminClient()
	if err != nil {
		tb.Fatal(err)
	}
	nodeKC, err := c.NodeKubeconfig("node-a")
	if err != nil {
		tb.Fatal(err)
	}
	if nodeCS, err = cluster.Clientset(nodeKC); err != nil {
		tb.Fatal(err)
	}
	caPath, _ := c.CA()
	if caPEM, err = os.ReadFile(caPath); err != nil {
		tb.Fatal(err)
	}
	return admin, nodeCS, &kubeletapi.APIReviewer{Client: nodeCS}, caPEM
}
