package main

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	kubeletconfig "k8s.io/kubelet/config/v1beta1"
)

// TestKubeletConfig: /configz's KubeletConfiguration shows the flags the
// node runs with, in kubelet's v1beta1 fields, and leaves out what
// speclet cannot say in them.
func TestKubeletConfig(t *testing.T) {
	o, err := parseRunFlags(strings.Fields("--runtime=sim --pod-manifest-path /etc/pods --address 10.1.2.3 --port 10251 --read-only-port 0 "+
		"--healthz-port 0 --sync-frequency 30s --cluster-dns 10.96.0.10 --cluster-domain cluster.local --resolv-conf= --max-pods 50 "+
		"--kube-api-qps 2.5 --event-qps 7 --eviction-soft memory.available<1Gi --eviction-soft-grace-period memory.available=1m30s "+
		"--eviction-minimum-reclaim nodefs.available=500Mi --kube-reserved cpu=200m,memory=500Mi --minimum-image-ttl-duration 5m "+
		"--container-log-max-size 5Mi --allowed-unsafe-sysctls kernel.msg*,net.core.somaxconn --anonymous-auth "+
		"--pod-logs-dir /data/pod-logs --log-format json -v 4"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m, err := o.configz("unix:///run/sim.sock")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{"kubeletconfig": m})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		KC kubeletconfig.KubeletConfiguration `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	kc := got.KC
	check := func(field string, got, want any) {
		t.Helper()
		if g, w := jsonString(t, got), jsonString(t, want); g != w {
			t.Errorf("%s = %s, want %s", field, g, w)
		}
	}
	check("kind", kc.Kind, "KubeletConfiguration")
	check("apiVersion", kc.APIVersion, "kubelet.config.k8s.io/v1beta1")
	check("staticPodPath", kc.StaticPodPath, "/etc/pods")
	check("address", kc.Address, "10.1.2.3")
	check("port", kc.Port, 10251)
	check("readOnlyPort", kc.ReadOnlyPort, 0)
	check("healthzPort", kc.HealthzPort, 0)
	check("syncFrequency", kc.SyncFrequency.Duration, 30*time.Second)
	check("clusterDNS", kc.ClusterDNS, []string{"10.96.0.10"})
	check("resolvConf", kc.ResolverConfig, "")
	check("maxPods", kc.MaxPods, 50)
	check("kubeAPIQPS", kc.KubeAPIQPS, nil) // 2.5 does not fit an int32
	check("eventRecordQPS", kc.EventRecordQPS, 7)
	check("evictionHard", kc.EvictionHard, map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%"})
	check("evictionSoft", kc.EvictionSoft, map[string]string{"memory.available": "1Gi"})
	check("evictionSoftGracePeriod", kc.EvictionSoftGracePeriod, map[string]string{"memory.available": "1m30s"})
	check("evictionMinimumReclaim", kc.EvictionMinimumReclaim, map[string]string{"nodefs.available": "500Mi"})
	check("kubeReserved", kc.KubeReserved, map[string]string{"cpu": "200m", "memory": "500Mi"})
	check("systemReserved", kc.SystemReserved, nil)
	check("imageMinimumGCAge", kc.ImageMinimumGCAge.Duration, 5*time.Minute)
	check("containerLogMaxSize", kc.ContainerLogMaxSize, "5Mi")
	check("allowedUnsafeSysctls", kc.AllowedUnsafeSysctls, []string{"kernel.msg*", "net.core.somaxconn"})
	check("authentication.anonymous.enabled", kc.Authentication.Anonymous.Enabled, true)
	check("authentication.webhook.enabled", kc.Authentication.Webhook.Enabled, false) // no --kubeconfig
	check("authorization.mode", kc.Authorization.Mode, "AlwaysAllow")
	check("cgroupsPerQOS", kc.CgroupsPerQOS, false) // --runtime=sim
	check("enforceNodeAllocatable", kc.EnforceNodeAllocatable, []string{"none"})
	check("containerRuntimeEndpoint", kc.ContainerRuntimeEndpoint, "unix:///run/sim.sock")
	check("registerNode", kc.RegisterNode, false)
	check("podLogsDir", kc.PodLogsDir, "/data/pod-logs")
	check("logging.format", kc.Logging.Format, "json")
	check("logging.verbosity", kc.Logging.Verbosity, 4)
	if got, want := jsonString(t, m["logging"]), `{"format":"json","verbosity":4}`; got != want {
		t.Errorf("logging = %s, want %s (no flushFrequency, vmodule or options: speclet has no such settings)", got, want)
	}
	// settings speclet does not have stay out of the answer
	for _, field := range []string{"podCIDR", "providerID", "cpuManagerPolicy", "memoryManagerPolicy", "topologyManagerPolicy", "featureGates",
		"streamingConnectionIdleTimeout", "imageMaximumGCAge", "shutdownGracePeriod", "memorySwap", "crashLoopBackOff"} {
		if strings.Contains(string(b), `"`+field+`"`) {
			t.Errorf("/configz shows %s, a setting speclet does not have:\n%s", field, b)
		}
	}
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
