package cluster_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"

	"github.com/speclet/speclet/test/cluster"
)

// nodeAddr is the node's address in TestNodeServes: a loopback address
// other than 127.0.0.1, so that what listens on 127.0.0.1 only is told
// apart from what listens on the node's address.
const nodeAddr = "127.0.0.2"

// TestNodeServes: what a node joined to a cluster (speclet --runtime=sim
// under a real kube-apiserver, with --address and --node-ip 127.0.0.2)
// shows of itself: nothing to a caller without credentials on its address
// (the read-only and healthz servers listen on 127.0.0.1), its settings
// on /configz through the API server as kubelet shows them,
// and the version in its Node status.
func TestNodeServes(t *testing.T) {
	if l, err := net.Listen("tcp", nodeAddr+":0"); err != nil {
		t.Skipf("no loopback address %s: %v", nodeAddr, err)
	} else {
		l.Close()
	}
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
	const name = "node-serves"
	n := c.NodeForTest(ctx, t, cluster.NodeOptions{Name: name, Bin: bin, Dir: t.TempDir(),
		Args: []string{"--address", nodeAddr, "--node-ip", nodeAddr,
			// settings /configz must show
			"--max-pods", "37", "--cluster-domain", "cluster.test", "--cluster-dns", "10.96.0.10", "--sync-frequency", "17s",
			"--image-gc-high-threshold", "90", "--container-log-max-files", "3", "--kube-api-qps", "40",
			"--eviction-hard", "memory.available<50Mi,nodefs.available<5%", "--allowed-unsafe-sysctls", "kernel.msg*"}})
	port := func(base string) string {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		return u.Port()
	}
	roPort, apiPort, healthzPort := port(n.Base), port(n.API), port(n.Healthz)
	startLog := func() string {
		b, err := os.ReadFile(n.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	t.Run("ReadOnlyAndHealthzOffTheNodeAddress", func(t *testing.T) {
		// n.Base (127.0.0.1) answered the harness's /healthz, n.Healthz
		// answers too; the node's own address refuses both connections.
		resp, err := http.Get(n.Healthz)
		if err != nil {
			t.Errorf("GET %s: %v", n.Healthz, err)
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != "ok" {
				t.Errorf("GET %s: %d %q, want 200 ok", n.Healthz, resp.StatusCode, body)
			}
		}
		for _, p := range []struct{ server, port string }{{"read-only", roPort}, {"healthz", healthzPort}} {
			conn, err := net.DialTimeout("tcp", net.JoinHostPort(nodeAddr, p.port), 10*time.Second)
			if err == nil {
				conn.Close()
				t.Errorf("the %s port %s accepts connections on the node address %s, want refused", p.server, p.port, nodeAddr)
			} else if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("dial %s:%s (%s): %v, want connection refused", nodeAddr, p.port, p.server, err)
			}
		}
		log := startLog()
		for _, want := range []string{
			fmt.Sprintf(`msg="read-only server listening" addr=http://127.0.0.1:%s`, roPort),
			fmt.Sprintf(`msg="kubelet API listening" addr=https://%s:%s`, nodeAddr, apiPort),
			fmt.Sprintf(`msg="healthz server listening" addr=http://127.0.0.1:%s/healthz`, healthzPort),
		} {
			if !strings.Contains(log, want) {
				t.Errorf("the start log does not say %s:\n%s", want, n.LogTail(40))
			}
		}
	})

	t.Run("KubeletAPIWithoutCredentials", func(t *testing.T) {
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		base := "https://" + net.JoinHostPort(nodeAddr, apiPort)
		for _, r := range []struct{ method, path string }{
			{"GET", "/"}, {"GET", "/healthz"}, {"GET", "/pods"}, {"GET", "/metrics"}, {"GET", "/metrics/resource"},
			{"GET", "/metrics/cadvisor"}, {"GET", "/stats/summary"}, {"GET", "/runningpods/"}, {"GET", "/configz"},
			{"GET", "/debug/pods"}, {"GET", "/debug/pprof/"}, {"GET", "/logs/"}, {"GET", "/spec/graph"},
			{"GET", "/containerLogs/default/any/main"}, {"POST", "/exec/default/any/main?command=id&stdout=1"},
			{"POST", "/attach/default/any/main?stdout=1"}, {"POST", "/portForward/default/any"},
			{"POST", "/run/default/any/main?cmd=id"}, {"HEAD", "/healthz"},
		} {
			req, _ := http.NewRequest(r.method, base+r.path, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("%s %s: %v", r.method, r.path, err)
				continue
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s %s without credentials: %d %q, want 401 or 403", r.method, r.path, resp.StatusCode, body)
			}
		}
	})

	t.Run("KubeletVersion", func(t *testing.T) {
		var got string
		for deadline := time.Now().Add(90 * time.Second); got == ""; time.Sleep(200 * time.Millisecond) {
			if nd, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
				got = nd.Status.NodeInfo.KubeletVersion
			}
			if got == "" && time.Now().After(deadline) {
				t.Fatalf("node %s has no kubeletVersion in its status within 90 s", name)
			}
		}
		v, err := version.ParseSemantic(got)
		if err != nil {
			t.Fatalf("status.nodeInfo.kubeletVersion %q: %v", got, err)
		}
		if v.Major() != 1 || v.Minor() != 34 || v.Patch() != 4 || v.PreRelease() != "" {
			t.Errorf("status.nodeInfo.kubeletVersion %q: want 1.34.4 (the Kubernetes version speclet follows)", got)
		}
	})

	t.Run("Configz", func(t *testing.T) {
		// Decoded as the e2e_node suite decodes it, {"kubeletconfig":
		// v1beta1.KubeletConfiguration}. The suite reads it through the API
		// server's node proxy, which refuses loopback node addresses
		// ("address not allowed"); so the request goes to the kubelet API
		// directly with the admin's client certificate, authenticated by
		// --client-ca-file and authorized by SubjectAccessReview as the
		// proxied one would be.
		rc, err := clientcmd.BuildConfigFromFlags("", c.AdminKubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		rc.TLSClientConfig.CAData, rc.TLSClientConfig.CAFile = nil, ""
		tc, err := rest.TLSConfigFor(rc)
		if err != nil {
			t.Fatal(err)
		}
		tc.InsecureSkipVerify = true // the node's self-signed serving certificate
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
		resp, err := client.Get("https://" + net.JoinHostPort(nodeAddr, apiPort) + "/configz")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET /configz as the admin: %d %s %q, want 200 application/json", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
		}
		var configz struct {
			ComponentConfig kubeletconfig.KubeletConfiguration `json:"kubeletconfig"`
		}
		if err := json.Unmarshal(raw, &configz); err != nil {
			t.Fatalf("decode /configz: %v\n%s", err, raw)
		}
		kc := configz.ComponentConfig
		if kc.Kind != "KubeletConfiguration" || kc.APIVersion != "kubelet.config.k8s.io/v1beta1" {
			t.Errorf("kind %q apiVersion %q, want KubeletConfiguration kubelet.config.k8s.io/v1beta1", kc.Kind, kc.APIVersion)
		}
		for _, c := range []struct {
			field string
			got   any
			want  any
		}{
			{"staticPodPath", kc.StaticPodPath, n.Manifests},
			{"address", kc.Address, nodeAddr},
			{"port", fmt.Sprint(kc.Port), apiPort},
			{"readOnlyPort", fmt.Sprint(kc.ReadOnlyPort), roPort},
			{"healthzPort", fmt.Sprint(ptrValue(kc.HealthzPort)), healthzPort},
			{"healthzBindAddress", kc.HealthzBindAddress, "127.0.0.1"},
			{"maxPods", kc.MaxPods, int32(37)},
			{"clusterDomain", kc.ClusterDomain, "cluster.test"},
			{"clusterDNS", fmt.Sprint(kc.ClusterDNS), "[10.96.0.10]"},
			{"syncFrequency", kc.SyncFrequency.Duration, 17 * time.Second},
			{"fileCheckFrequency", kc.FileCheckFrequency.Duration, 20 * time.Second},
			{"imageGCHighThresholdPercent", ptrValue(kc.ImageGCHighThresholdPercent), int32(90)},
			{"imageGCLowThresholdPercent", ptrValue(kc.ImageGCLowThresholdPercent), int32(80)},
			{"containerLogMaxFiles", ptrValue(kc.ContainerLogMaxFiles), int32(3)},
			{"containerLogMaxSize", kc.ContainerLogMaxSize, "10Mi"},
			{"kubeAPIQPS", ptrValue(kc.KubeAPIQPS), int32(40)},
			{"evictionHard", fmt.Sprint(kc.EvictionHard), "map[memory.available:50Mi nodefs.available:5%]"},
			{"allowedUnsafeSysctls", fmt.Sprint(kc.AllowedUnsafeSysctls), "[kernel.msg*]"},
			{"authentication.x509.clientCAFile", kc.Authentication.X509.ClientCAFile != "", true},
			{"authentication.webhook.enabled", ptrValue(kc.Authentication.Webhook.Enabled), true},
			{"authentication.anonymous.enabled", ptrValue(kc.Authentication.Anonymous.Enabled), false},
			{"authorization.mode", string(kc.Authorization.Mode), "Webhook"},
			{"cgroupDriver", kc.CgroupDriver, "cgroupfs"},
			{"cgroupsPerQOS", ptrValue(kc.CgroupsPerQOS), false}, // --runtime sim makes no cgroups
		} {
			if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
				t.Errorf("/configz %s = %v, want %v", c.field, c.got, c.want)
			}
		}
		if kc.PodCIDR != "" || kc.ProviderID != "" {
			t.Errorf("/configz shows settings speclet does not have: podCIDR %q providerID %q", kc.PodCIDR, kc.ProviderID)
		}
	})
}

// ptrValue is *p, or the zero value for nil.
func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
