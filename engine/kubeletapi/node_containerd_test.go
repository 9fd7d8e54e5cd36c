package kubeletapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/criaudit"
	"github.com/speclet/speclet/engine/kubeletapi"
)

// testCA is a CA that signs client certificates for the tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// client returns PEM cert and key of a client certificate for user in groups.
func (ca *testCA) client(t testing.TB, user string, groups ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: user, Organization: groups},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// onlyUser allows one user everything and refuses everybody else, as an
// authorizer with RBAC for one user would.
type onlyUser string

func (u onlyUser) Authorize(_ context.Context, a kubeletapi.Attributes) (bool, string, error) {
	if a.User.Name == string(u) {
		return true, "", nil
	}
	return false, "no RBAC for " + a.User.Name, nil
}

// node is speclet's engine on a real containerd with the kubelet API served
// on 127.0.0.1.
type node struct {
	eng     *engine.Engine
	api     *kubeletapi.API
	updates chan config.PodUpdate
	base    string // https://127.0.0.1:PORT
	server  []byte // serving certificate, PEM
	ca      *testCA
	image   string
	rt      *cri.Client
	// apiCalls records the API's CRI calls, made through a client of its
	// own (the engine's go to rt).
	apiCalls *criaudit.Recorder
	// probes is the engine's prober series (the API's /metrics/probes).
	probes *prometheus.Registry
}

// auditedClient dials endpoint through a new recorder's interceptors; the
// client closes when t ends.
func auditedClient(t testing.TB, endpoint string) (*cri.Client, *criaudit.Recorder) {
	t.Helper()
	rec := criaudit.NewRecorder()
	c, err := cri.Dial(context.Background(), endpoint, rec.DialOption())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, rec
}

// startNode starts the node; its API trusts client certificates of the
// node's test CA and of extraCAs (PEM).
func startNode(t testing.TB, authz kubeletapi.Authorizer, tokens kubeletapi.TokenReviewer, extraCAs ...[]byte) *node {
	t.Helper()
	return startNodeServing(t, authz, tokens, nil, extraCAs...)
}

// serving returns the API's TLS configuration and the PEM CA its clients
// trust; root is the node's root dir.
type serving func(api *kubeletapi.API, root string) (cfg *tls.Config, ca []byte)

// startNodeServing is startNode with the TLS configuration of serve; nil:
// the self-signed certificate under the root dir.
func startNodeServing(t testing.TB, authz kubeletapi.Authorizer, tokens kubeletapi.TokenReviewer, serve serving, extraCAs ...[]byte) *node {
	t.Helper()
	c := harness.ForTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rt, err := cri.Dial(ctx, c.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	root := filepath.Join(t.TempDir(), "root")
	probes := prometheus.NewRegistry()
	eng, err := engine.New(engine.Config{Runtime: rt, RootDir: root, NodeName: "node-a",
		CrashLoopBackOffBase: time.Second, Log: slog.New(slog.DiscardHandler),
		Registerer: prometheus.NewRegistry(), ProbeRegisterer: probes})
	if err != nil {
		t.Fatal(err)
	}
	apiRT, apiCalls := auditedClient(t, c.Endpoint)
	n := &node{eng: eng, updates: make(chan config.PodUpdate, 4), ca: newCA(t), image: c.ImageRef("busybox:latest"), rt: rt,
		apiCalls: apiCalls, probes: probes}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx, n.updates) }()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(n.ca.pem)
	for _, p := range extraCAs {
		pool.AppendCertsFromPEM(p)
	}
	api, err := kubeletapi.New(kubeletapi.Config{Host: eng, Runtime: apiRT, NodeName: "node-a", RootDir: root, PodLogsDir: filepath.Join(root, "logs"), ClientCAs: pool,
		Tokens: tokens, Authorizer: authz, Probes: probes,
		// every stats request makes its own pass, so that the CRI audit
		// sees each stats route's calls (the reuse is TestStatsCache's)
		Stats: kubeletapi.NewStatsCache(-1),
		Labels: kubeletapi.Labels{PodUID: engine.LabelPodUID, PodName: engine.LabelPodName,
			PodNamespace: engine.LabelPodNamespace, ContainerName: engine.LabelContainerName}})
	if err != nil {
		t.Fatal(err)
	}
	n.api = api
	var tlsConfig *tls.Config
	if serve != nil {
		tlsConfig, n.server = serve(api, root)
	} else {
		cert, certPath, err := kubeletapi.ServingCert("", "", filepath.Join(root, "pki"), "node-a", nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		n.server, _ = os.ReadFile(certPath)
		tlsConfig = api.TLSConfig(cert)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api, TLSConfig: tlsConfig}
	go srv.Serve(tls.NewListener(l, srv.TLSConfig))
	n.base = "https://" + l.Addr().String()
	t.Cleanup(func() {
		srv.Close()
		// remove the pods before the harness stops containerd
		var pods []*v1.Pod
		pods = append(pods, eng.Pods()...)
		n.updates <- config.PodUpdate{Op: config.OpRemove, Pods: pods, Source: config.SourceFile}
		deadline := time.Now().Add(time.Minute)
		for len(eng.Pods()) > 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
		<-done
	})
	return n
}

func (n *node) pod(name string, c v1.Container) *v1.Pod {
	return n.podIn("default", name, c)
}

func (n *node) podIn(ns, name string, c v1.Container) *v1.Pod {
	grace := int64(1)
	c.Image = n.image
	c.ImagePullPolicy = v1.PullIfNotPresent
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name + "-uid"),
			Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
		Spec: v1.PodSpec{HostNetwork: true, RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{c}},
	}
}

// restConfig is a client-go config for the API as user (a client
// certificate), trusting the node's serving certificate.
func (n *node) restConfig(t testing.TB, user string, groups ...string) *restclient.Config {
	crt, key := n.ca.client(t, user, groups...)
	return &restclient.Config{Host: n.base, TLSClientConfig: restclient.TLSClientConfig{CertData: crt, KeyData: key, CAData: n.server}}
}

// httpClient is an HTTPS client as user; "" sends no certificate.
func (n *node) httpClient(t testing.TB, user string, groups ...string) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(n.server)
	cfg := &tls.Config{RootCAs: pool}
	if user != "" {
		crt, key := n.ca.client(t, user, groups...)
		pair, err := tls.X509KeyPair(crt, key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (n *node) waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(n.eng.Pods(), "", " ")
			t.Fatalf("timed out waiting for %s; pods:\n%s", what, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// status is the engine's newest published copy of the pod named name, nil
// if it publishes none.
func (n *node) status(name string) *v1.Pod {
	for _, p := range n.eng.Pods() {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// allRunning reports whether the engine publishes every pod of names in
// phase Running.
func (n *node) allRunning(names ...string) bool {
	for _, name := range names {
		if p := n.status(name); p == nil || p.Status.Phase != v1.PodRunning {
			return false
		}
	}
	return true
}

// restarts is the restart count of the one container of the pod named
// name; 0 while the engine publishes no such pod, or it has not one
// container status.
func (n *node) restarts(name string) int32 {
	if p := n.status(name); p != nil && len(p.Status.ContainerStatuses) == 1 {
		return p.Status.ContainerStatuses[0].RestartCount
	}
	return 0
}

// execIn runs a remotecommand session (exec or attach) over SPDY.
func execIn(cfg *restclient.Config, raw string, o remotecommand.StreamOptions) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return ex.StreamWithContext(ctx, o)
}

type lineWriter struct{ lines chan string }

func (w *lineWriter) Write(p []byte) (int, error) { w.lines <- string(p); return len(p), nil }

// getIndex fetches /index.html from 127.0.0.1:port (a forwarded httpd):
// its body, and whether it answered 200.
// waitIndex waits (waitFor) until getIndex(port) answers 200 and returns
// the body of that answer.
func (n *node) waitIndex(t testing.TB, what string, port int) string {
	t.Helper()
	var body string
	n.waitFor(t, what, func() bool {
		var ok bool
		body, ok = getIndex(port)
		return ok
	})
	return body
}

// getIndex is the body of GET /index.html on 127.0.0.1:port and whether it
// answered 200.
func getIndex(port int) (string, bool) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/index.html", port))
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode == 200
}
