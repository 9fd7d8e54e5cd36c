package podresources

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
)

// podSet is a node's pods: all of them declared, active those List answers.
type podSet struct{ all, active []*v1.Pod }

func (s podSet) Pods() []*v1.Pod       { return s.all }
func (s podSet) ActivePods() []*v1.Pod { return s.active }

// devices allocates devices to containers by "uid/container".
type devices struct {
	byContainer map[string][]*podresourcesv1.ContainerDevices
	all         []*podresourcesv1.ContainerDevices
}

func (d devices) ContainerDevices(uid, name string) []*podresourcesv1.ContainerDevices {
	return d.byContainer[uid+"/"+name]
}
func (d devices) AllocatableDevices() []*podresourcesv1.ContainerDevices { return d.all }

func pod(ns, name, uid string, init []string, sidecars []string, ctrs ...string) *v1.Pod {
	p := &v1.Pod{}
	p.Namespace, p.Name, p.UID = ns, name, types.UID(uid)
	always := v1.ContainerRestartPolicyAlways
	for _, c := range init {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: c})
	}
	for _, c := range sidecars {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: c, RestartPolicy: &always})
	}
	for _, c := range ctrs {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c})
	}
	return p
}

// serve starts a Server on a socket under a temporary root dir and
// returns a client of both versions; the server stops at the test's end.
func serve(t *testing.T, c Config) (podresourcesv1.PodResourcesListerClient, v1alpha1.PodResourcesListerClient, *Server) {
	t.Helper()
	s, err := Listen(SocketPath(t.TempDir()), c)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() { s.Stop(5 * time.Second) })
	conn, err := grpc.NewClient("unix://"+s.Path(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return podresourcesv1.NewPodResourcesListerClient(conn), v1alpha1.NewPodResourcesListerClient(conn), s
}

func ctr(name string, devs ...*podresourcesv1.ContainerDevices) *podresourcesv1.ContainerResources {
	return &podresourcesv1.ContainerResources{Name: name, Devices: devs}
}

func equal(t *testing.T, what string, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func TestListAndGet(t *testing.T) {
	web := pod("default", "web", "u-web", []string{"setup"}, []string{"proxy"}, "app", "metrics")
	done := pod("batch", "done", "u-done", nil, nil, "job")
	gpu := &podresourcesv1.ContainerDevices{ResourceName: "example.com/gpu", DeviceIds: []string{"gpu-0"},
		Topology: &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: 0}}}}
	devs := devices{byContainer: map[string][]*podresourcesv1.ContainerDevices{"u-web/app": {gpu}},
		all: []*podresourcesv1.ContainerDevices{gpu, {ResourceName: "example.com/gpu", DeviceIds: []string{"gpu-1"}}}}
	reg := prometheus.NewRegistry()
	cli, alpha, _ := serve(t, Config{Pods: podSet{all: []*v1.Pod{web, done}, active: []*v1.Pod{web}}, Devices: devs,
		Registerer: reg, now: func() time.Time { return time.Unix(0, 0) }})
	ctx := context.Background()

	list, err := cli.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wantWeb := &podresourcesv1.PodResources{Name: "web", Namespace: "default",
		Containers: []*podresourcesv1.ContainerResources{ctr("proxy"), ctr("app", gpu), ctr("metrics")}}
	equal(t, "List (the active pods; sidecars, not init containers)", list,
		&podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{wantWeb}})

	got, err := cli.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: "default", PodName: "web"})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "Get default/web", got, &podresourcesv1.GetPodResourcesResponse{PodResources: wantWeb})
	// Get finds every declared pod, an inactive one too
	got, err = cli.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: "batch", PodName: "done"})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "Get batch/done", got, &podresourcesv1.GetPodResourcesResponse{PodResources: &podresourcesv1.PodResources{
		Name: "done", Namespace: "batch", Containers: []*podresourcesv1.ContainerResources{ctr("job")}}})

	for _, req := range []*podresourcesv1.GetPodResourcesRequest{
		{PodNamespace: "default", PodName: "nope"}, {PodNamespace: "batch", PodName: "web"}, {}} {
		_, err := cli.Get(ctx, req)
		want := "pod " + req.PodName + " in namespace " + req.PodNamespace + " not found"
		if st, _ := status.FromError(err); st.Code() != codes.Unknown || st.Message() != want {
			t.Errorf("Get %s/%s: %v, want code Unknown %q", req.PodNamespace, req.PodName, err, want)
		}
	}

	alloc, err := cli.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "GetAllocatableResources", alloc, &podresourcesv1.AllocatableResourcesResponse{Devices: devs.all})

	// v1alpha1: every declared pod, regular containers only, devices without topology
	alist, err := alpha.List(ctx, &v1alpha1.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "v1alpha1 List", alist, &v1alpha1.ListPodResourcesResponse{PodResources: []*v1alpha1.PodResources{
		{Name: "web", Namespace: "default", Containers: []*v1alpha1.ContainerResources{
			{Name: "app", Devices: []*v1alpha1.ContainerDevices{{ResourceName: "example.com/gpu", DeviceIds: []string{"gpu-0"}}}},
			{Name: "metrics"}}},
		{Name: "done", Namespace: "batch", Containers: []*v1alpha1.ContainerResources{{Name: "job"}}},
	}})

	for name, want := range map[string]float64{
		"kubelet_pod_resources_endpoint_requests_total":           7,
		"kubelet_pod_resources_endpoint_requests_list":            1,
		"kubelet_pod_resources_endpoint_requests_get":             5,
		"kubelet_pod_resources_endpoint_requests_get_allocatable": 1,
		"kubelet_pod_resources_endpoint_errors_get":               3,
	} {
		v1Count := counterValue(t, reg, name, "v1")
		if v1Count != want {
			t.Errorf("%s{server_api_version=v1} = %v, want %v", name, v1Count, want)
		}
	}
	if n := counterValue(t, reg, "kubelet_pod_resources_endpoint_requests_total", "v1alpha1"); n != 1 {
		t.Errorf("requests_total{v1alpha1} = %v, want 1", n)
	}
}

// counterValue is the counter name{server_api_version=version} on reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name, version string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		if !strings.HasPrefix(mf.GetHelp(), "[ALPHA] ") {
			t.Errorf("%s: help %q, kubelet's starts with [ALPHA]", name, mf.GetHelp())
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == version {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s{server_api_version=%q}", name, version)
	return 0
}

// Without a device-plugin manager there are no devices, and the CPU and
// memory managers' "none" policies give no CPU ids and no memory.
func TestNoDevices(t *testing.T) {
	cli, _, _ := serve(t, Config{Pods: podSet{all: []*v1.Pod{pod("a", "b", "u", nil, nil, "c")}, active: []*v1.Pod{pod("a", "b", "u", nil, nil, "c")}}})
	ctx := context.Background()
	alloc, err := cli.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(alloc.Devices)+len(alloc.CpuIds)+len(alloc.Memory) != 0 {
		t.Errorf("GetAllocatableResources = %v, want nothing", alloc)
	}
	list, err := cli.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "List", list, &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		{Name: "b", Namespace: "a", Containers: []*podresourcesv1.ContainerResources{ctr("c")}}}})
}

// The rate limit is kubelet's: a burst of 10 calls, then one more per
// 1/100 s, for every method and every caller together.
func TestRateLimit(t *testing.T) {
	var mu sync.Mutex
	clock := time.Unix(1000, 0)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	cli, alpha, _ := serve(t, Config{Pods: podSet{}, now: now})
	ctx := context.Background()
	calls := []func() error{
		func() error { _, err := cli.List(ctx, &podresourcesv1.ListPodResourcesRequest{}); return err },
		func() error {
			_, err := cli.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
			return err
		},
		func() error { _, err := alpha.List(ctx, &v1alpha1.ListPodResourcesRequest{}); return err },
	}
	for i := 0; i < Burst; i++ {
		if err := calls[i%len(calls)](); err != nil {
			t.Fatalf("call %d of the burst: %v", i+1, err)
		}
	}
	for i := range calls {
		if err := calls[i](); !errors.Is(err, ErrLimitExceeded) {
			t.Errorf("call over the burst: %v, want %v", err, ErrLimitExceeded)
		}
	}
	// the limit holds a Get too, before it looks the pod up
	if _, err := cli.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodName: "x"}); !errors.Is(err, ErrLimitExceeded) {
		t.Errorf("Get over the burst: %v, want %v", err, ErrLimitExceeded)
	}
	mu.Lock()
	clock = clock.Add(time.Second / QPS)
	mu.Unlock()
	if err := calls[0](); err != nil {
		t.Errorf("a call 1/%d s later: %v", QPS, err)
	}
	if err := calls[0](); !errors.Is(err, ErrLimitExceeded) {
		t.Errorf("the next one: %v, want %v", err, ErrLimitExceeded)
	}
}

// The socket: a stale one (or any file) at its path is replaced, the
// directory is kubelet's 0750, Stop removes the socket; a path that cannot
// hold a socket is a clear error.
func TestSocket(t *testing.T) {
	root := t.TempDir()
	path := SocketPath(root)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Listen(path, Config{Pods: podSet{}})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("%s after Listen: %v, %v; want a socket", path, fi, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("%s holds %d entries, want only the socket (no temporary name left)", filepath.Dir(path), len(entries))
	}
	s.Stop(5 * time.Second)
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after Stop: %v, want it removed", path, err)
	}

	fresh := filepath.Join(t.TempDir(), "root")
	s, err = Listen(SocketPath(fresh), Config{Pods: podSet{}})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	if fi, err := os.Stat(filepath.Join(fresh, DirName)); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("made directory: %v, %v; want mode 0750", fi, err)
	}
	s.Stop(5 * time.Second)

	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	long := filepath.Join(t.TempDir(), strings.Repeat("r", 100))
	busy := filepath.Join(t.TempDir(), "busy")
	os.MkdirAll(filepath.Join(SocketPath(busy), "x"), 0o700) // a directory where the socket goes
	for _, c := range []struct{ root, want string }{
		{file, "not a directory"},
		{long, "a unix socket's longest is 107"},
		{busy, "remove the stale"},
	} {
		_, err := Listen(SocketPath(c.root), Config{Pods: podSet{}})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "pod-resources socket") {
			t.Errorf("Listen under %s: %v, want an error with %q", c.root, err, c.want)
		}
	}
}
