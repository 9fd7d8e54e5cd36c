package engine

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/sim"
	"github.com/speclet/speclet/engine/config"
)

// TestRuntimeFeatures runs the pods whose fate the runtime's Status
// features decide on the simulated runtime, once as containerd 1.6 reports
// itself (no handlers, no features) and once as containerd 2.x does
// (recursive read-only mounts, user namespaces, supplemental groups
// policy): supplementalGroupsPolicy Strict is refused with kubelet's
// SupplementalGroupsPolicyNotSupported on the first and runs on the
// second, its user in the status; recursiveReadOnly Enabled is kubelet's
// CreateContainerConfigError on the first and a recursive read-only CRI
// mount on the second; IfPossible follows the runtime. The status's
// volumeMounts show the resolved mode.
func TestRuntimeFeatures(t *testing.T) {
	v2 := sim.Options{
		Handlers: []*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true, UserNamespaces: true}}},
		Features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true},
	}
	for _, tc := range []struct {
		name string
		opts sim.Options
		v2   bool
	}{{"containerd 1.6", sim.Options{}, false}, {"containerd 2.x", v2, true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFeatures(t, tc.opts)
			strict := f.pod("strict", func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](3000),
					SupplementalGroups: []int64{4000}, SupplementalGroupsPolicy: ptr.To(v1.SupplementalGroupsPolicyStrict)}
			})
			enabled := f.pod("enabled", roMounts(v1.RecursiveReadOnlyEnabled))
			possible := f.pod("possible", roMounts(v1.RecursiveReadOnlyIfPossible))

			rro := v1.RecursiveReadOnlyDisabled
			if tc.v2 {
				rro = v1.RecursiveReadOnlyEnabled
			}
			wantMounts := []v1.VolumeMountStatus{{Name: "data", MountPath: "/data", ReadOnly: true, RecursiveReadOnly: &rro}, {Name: "data", MountPath: "/rw"}}
			st := f.wait(possible, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
			if got := st.Status.ContainerStatuses[0].VolumeMounts; !reflect.DeepEqual(got, wantMounts) {
				t.Errorf("IfPossible: volumeMounts %+v, want %+v", got, wantMounts)
			}
			if m := f.mount("possible", "/data"); m == nil || !m.Readonly || m.RecursiveReadOnly != tc.v2 {
				t.Errorf("IfPossible: CRI mount %+v, want read-only, recursive %v", m, tc.v2)
			}

			if !tc.v2 {
				st := f.wait(strict, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
				if st.Status.Reason != "SupplementalGroupsPolicyNotSupported" || st.Status.Message != "Pod was rejected: SupplementalGroupsPolicy=Strict is not supported in this node" {
					t.Errorf("Strict: %s %q", st.Status.Reason, st.Status.Message)
				}
				st = f.wait(enabled, func(p *v1.Pod) bool {
					cs := p.Status.ContainerStatuses
					return len(cs) > 0 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError"
				})
				const msg = `failed to resolve recursive read-only mode: volume "data" requested recursive read-only mode, but it is not supported by the runtime`
				if got := st.Status.ContainerStatuses[0].State.Waiting.Message; got != msg {
					t.Errorf("Enabled: waiting message %q, want %q", got, msg)
				}
				if u := st.Status.ContainerStatuses[0].User; u != nil {
					t.Errorf("user %+v from a runtime that reports none", u)
				}
				return
			}
			st = f.wait(strict, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
			want := &v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000}}}
			if got := st.Status.ContainerStatuses[0].User; !reflect.DeepEqual(got, want) {
				t.Errorf("Strict: user %+v, want %+v", got, want)
			}
			if p := f.created("strict").GetLinux().GetSecurityContext().GetSupplementalGroupsPolicy(); p != runtimeapi.SupplementalGroupsPolicy_Strict {
				t.Errorf("Strict: CRI policy %s", p)
			}
			st = f.wait(enabled, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
			if got := st.Status.ContainerStatuses[0].VolumeMounts; !reflect.DeepEqual(got, wantMounts) {
				t.Errorf("Enabled: volumeMounts %+v, want %+v", got, wantMounts)
			}
			if m := f.mount("enabled", "/data"); m == nil || !m.Readonly || !m.RecursiveReadOnly {
				t.Errorf("Enabled: CRI mount %+v, want read-only, recursive", m)
			}
			if m := f.mount("enabled", "/rw"); m == nil || m.Readonly || m.RecursiveReadOnly {
				t.Errorf("Enabled: CRI mount %+v, want writable", m)
			}
		})
	}
}

// roMounts gives the pod an emptyDir mounted read-only at /data with
// recursiveReadOnly mode, and writable at /rw.
func roMounts(mode v1.RecursiveReadOnlyMode) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true, RecursiveReadOnly: &mode}, {Name: "data", MountPath: "/rw"}}
	}
}

// featuresRun is an engine on a simulated runtime with given features,
// and the CreateContainer requests it made by pod name.
type featuresRun struct {
	t       *testing.T
	e       *Engine
	updates chan config.PodUpdate
	mu      sync.Mutex
	creates map[string]*runtimeapi.ContainerConfig
}

func startFeatures(t *testing.T, o sim.Options) *featuresRun {
	o.Images = []string{"busybox:latest"}
	srv, err := sim.Start(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	f := &featuresRun{t: t, updates: make(chan config.PodUpdate, 8), creates: map[string]*runtimeapi.ContainerConfig{}}
	seen := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*runtimeapi.CreateContainerRequest); ok {
			f.mu.Lock()
			f.creates[r.GetSandboxConfig().GetMetadata().GetName()] = r.GetConfig()
			f.mu.Unlock()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	rt := auditRuntime(t, srv.Endpoint, cri.WithInterceptors(seen, nil))
	f.e, err = New(Config{Runtime: rt, RootDir: t.TempDir(), NodeName: "node", Steps: coverStep,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.e.Run(ctx, f.updates) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// pod adds a pod named name with one busybox container, changed by with.
func (f *featuresRun) pod(name string, with func(*v1.Pod)) types.UID {
	g := int64(0)
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"),
		Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: &g, RestartPolicy: v1.RestartPolicyAlways,
			Containers: []v1.Container{{Name: "c", Image: "busybox:latest", ImagePullPolicy: v1.PullIfNotPresent}}}}
	with(p)
	f.updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{p}, Source: config.SourceFile}
	return p.UID
}

// wait returns the pod once ok holds of it; the test fails after 30 s.
func (f *featuresRun) wait(uid types.UID, ok func(*v1.Pod) bool) *v1.Pod {
	f.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if p := f.e.Pod(uid); p != nil && ok(p) {
			return p
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("pod %s: not as expected after 30 s: %+v", uid, f.e.Pod(uid))
		}
	}
}

// created is the last CreateContainer config of pod's container.
func (f *featuresRun) created(pod string) *runtimeapi.ContainerConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.creates[pod]
}

// mount is the CRI mount at path of pod's container; nil when none.
func (f *featuresRun) mount(pod, path string) *runtimeapi.Mount {
	for _, m := range f.created(pod).GetMounts() {
		if m.ContainerPath == path {
			return m
		}
	}
	return nil
}
