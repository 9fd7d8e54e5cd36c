// Package floor measures the direct-CRI floor that speclet's pod start and
// removal are compared against: what a client talking straight to the
// runtime, with unlimited parallelism and no state machine, achieves.
package floor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
)

// grace is the stop timeout in seconds of every container, as a pod with
// terminationGracePeriodSeconds: 1.
const grace = 1

// command is each pod's only container. busybox sleep as PID 1 has no
// SIGTERM handler, so the kernel ignores the signal and every stop waits the
// full grace period before the kill, as a plain workload does under kubelet.
var command = []string{"sleep", "3600"}

// Result is one burst's measurements.
type Result struct {
	PodStart  []time.Duration // per pod: burst start to StartContainer return
	StartAll  time.Duration   // burst start to all containers RUNNING
	RemoveAll time.Duration   // removal start to no sandbox left
	// StopRetries counts StopContainer errors on containers that had in
	// fact stopped, or that a second StopContainer stopped.
	StopRetries int
	// CallTime is the time spent in each start call over all pods, by
	// CRI method: RunPodSandbox, CreateContainer, StartContainer.
	CallTime map[string]time.Duration
}

// Options vary what each pod of a burst asks of the runtime.
type Options struct {
	// PodFiles gives each container the two files kubelet (and speclet)
	// bind-mount into every container of a pod that has an IP: a hosts
	// file at /etc/hosts and an empty termination message file at
	// /dev/termination-log, both written before CreateContainer. The bare
	// floor makes no mount; this one does what the same pod costs any
	// node agent that implements the pod spec.
	PodFiles bool
	// SandboxSeccomp runs each sandbox under the runtime's default seccomp
	// profile, as kubelet (and speclet) ask for every sandbox
	// (generatePodSandboxLinuxConfig): runc then loads a seccomp filter
	// into each pause process, which the bare floor's never has.
	SandboxSeccomp bool
	// MaskedPaths and ReadonlyPaths are given to every container, as
	// kubelet (and speclet) give every container under the default
	// procMount the default lists (engine/podspec.DefaultMaskedPaths):
	// runc then masks or remounts each path read-only in the container's
	// mount namespace, which it does not for a container that asks none.
	MaskedPaths, ReadonlyPaths []string
	// PodCgroup, when set, makes each pod's cgroup before its
	// RunPodSandbox, as kubelet's --cgroups-per-qos does (speclet's
	// run_sandbox does), and returns it: the CgroupParent of the sandbox
	// and the container, so that runc nests both in it.
	// RemovePodCgroup removes it after the pod's RemovePodSandbox.
	PodCgroup       func(uid string) (string, error)
	RemovePodCgroup func(uid string) error
	// Resources are given to every sandbox and container (kubelet gives a
	// BestEffort pod 2 CPU shares and its containers an oom_score_adj of
	// 1000).
	Resources *runtimeapi.LinuxContainerResources
	// ImageStatus asks the runtime for the image before each
	// CreateContainer, and fails the pod when it is not present, as
	// kubelet's EnsureImageExists (and speclet's check_image) does for an
	// IfNotPresent image: the fourth CRI call of every container start.
	ImageStatus bool
}

// Burst starts n host-network pods at once (RunPodSandbox + CreateContainer
// + StartContainer of command in image, which must be present; with
// Options.ImageStatus an ImageStatus before each CreateContainer), waits until
// ListContainers shows all n RUNNING, then removes them (StopContainer with
// grace, StopPodSandbox, RemovePodSandbox) and checks that ListPodSandbox
// shows none. Each pod gets a log directory under logDir. Pods carry a label
// unique to the burst, so the runtime may hold other pods. On error the
// runtime may keep pods of the burst.
func Burst(ctx context.Context, rt cri.Runtime, image string, n int, logDir string, opts ...Options) (Result, error) {
	var o Options
	for _, x := range opts {
		o = x
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return Result{}, err
	}
	run := hex.EncodeToString(rnd[:])
	labels := map[string]string{"speclet.floor/run": run}

	type pod struct {
		sandbox, container   string
		started              time.Duration
		run, create, startIn time.Duration // time in each start call
		err                  error
	}
	pods := make([]pod, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &pods[i]
			name := fmt.Sprintf("floor-%s-%d", run, i)
			dir := filepath.Join(logDir, name)
			if p.err = os.MkdirAll(dir, 0o755); p.err != nil {
				return
			}
			sc := &runtimeapi.PodSandboxConfig{
				Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "floor", Uid: run + fmt.Sprint(i)},
				Labels:       labels,
				LogDirectory: dir,
				Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
					NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
				}},
			}
			if o.SandboxSeccomp {
				sc.Linux.SecurityContext.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
			}
			if o.PodCgroup != nil {
				if sc.Linux.CgroupParent, p.err = o.PodCgroup(sc.Metadata.Uid); p.err != nil {
					return
				}
			}
			if o.Resources != nil {
				sc.Linux.Resources = &runtimeapi.LinuxContainerResources{CpuShares: o.Resources.CpuShares}
			}
			t := time.Now()
			p.sandbox, p.err = rt.RunPodSandbox(ctx, sc, "")
			p.run = time.Since(t)
			if p.err != nil {
				return
			}
			cc := &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
				Image:    &runtimeapi.ImageSpec{Image: image},
				Command:  command,
				Labels:   labels,
				LogPath:  "main_0.log",
			}
			if o.PodFiles {
				if cc.Mounts, p.err = podFiles(dir); p.err != nil {
					return
				}
			}
			if o.MaskedPaths != nil || o.ReadonlyPaths != nil || o.Resources != nil {
				cc.Linux = &runtimeapi.LinuxContainerConfig{Resources: o.Resources}
			}
			if o.MaskedPaths != nil || o.ReadonlyPaths != nil {
				cc.Linux.SecurityContext = &runtimeapi.LinuxContainerSecurityContext{
					MaskedPaths: o.MaskedPaths, ReadonlyPaths: o.ReadonlyPaths,
				}
			}
			if o.ImageStatus {
				if p.err = imagePresent(ctx, rt, cc.Image); p.err != nil {
					return
				}
			}
			t = time.Now()
			p.container, p.err = rt.CreateContainer(ctx, p.sandbox, cc, sc)
			p.create = time.Since(t)
			if p.err != nil {
				return
			}
			t = time.Now()
			p.err = rt.StartContainer(ctx, p.container)
			p.startIn = time.Since(t)
			if p.err != nil {
				return
			}
			p.started = time.Since(t0)
		}()
	}
	wg.Wait()
	res := Result{CallTime: map[string]time.Duration{}}
	var errs []error
	for _, p := range pods {
		errs = append(errs, p.err)
		res.PodStart = append(res.PodStart, p.started)
		res.CallTime["RunPodSandbox"] += p.run
		res.CallTime["CreateContainer"] += p.create
		res.CallTime["StartContainer"] += p.startIn
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("start burst of %d pods: %w", n, err)
	}
	running := &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: labels,
	}
	for {
		cs, err := rt.ListContainers(ctx, running)
		if err != nil {
			return res, fmt.Errorf("wait for %d running containers: %w", n, err)
		}
		if len(cs) == n {
			break
		}
		if time.Since(t0) > 5*time.Minute {
			return res, fmt.Errorf("wait for %d running containers: %d running after 5 minutes", n, len(cs))
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.StartAll = time.Since(t0)

	t1 := time.Now()
	var stopRetries atomic.Int64
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &pods[i]
			if p.err = stopContainer(ctx, rt, p.container, &stopRetries); p.err != nil {
				return
			}
			if p.err = rt.StopPodSandbox(ctx, p.sandbox); p.err != nil {
				return
			}
			if p.err = rt.RemovePodSandbox(ctx, p.sandbox); p.err != nil {
				return
			}
			if o.RemovePodCgroup != nil {
				p.err = o.RemovePodCgroup(run + fmt.Sprint(i))
			}
		}()
	}
	wg.Wait()
	errs = errs[:0]
	for _, p := range pods {
		errs = append(errs, p.err)
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("remove burst of %d pods: %w", n, err)
	}
	left, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: labels})
	if err != nil {
		return res, fmt.Errorf("list sandboxes after removal: %w", err)
	}
	if len(left) > 0 {
		return res, fmt.Errorf("remove burst of %d pods: %d sandboxes left", n, len(left))
	}
	res.RemoveAll = time.Since(t1)
	res.StopRetries = int(stopRetries.Load())
	return res, nil
}

// imagePresent fails when the runtime does not hold image.
func imagePresent(ctx context.Context, rt cri.Runtime, image *runtimeapi.ImageSpec) error {
	img, err := rt.ImageStatus(ctx, image)
	if err != nil {
		return fmt.Errorf("image status of %s: %w", image.Image, err)
	}
	if img == nil {
		return fmt.Errorf("image %s: not present", image.Image)
	}
	return nil
}

// podFiles writes a pod's hosts file and a container's termination message
// file under dir and returns their mounts, as podspec's hostsMount and
// terminationMount do.
func podFiles(dir string) ([]*runtimeapi.Mount, error) {
	hosts := filepath.Join(dir, "etc-hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1\tlocalhost\n"), 0o644); err != nil {
		return nil, fmt.Errorf("write hosts file: %w", err)
	}
	term := filepath.Join(dir, "termination-log")
	if err := os.WriteFile(term, nil, 0o666); err != nil {
		return nil, fmt.Errorf("create termination message file: %w", err)
	}
	return []*runtimeapi.Mount{
		{ContainerPath: "/etc/hosts", HostPath: hosts},
		{ContainerPath: "/dev/termination-log", HostPath: term},
	}, nil
}

// stopContainer stops id with grace, as a kubelet pod worker would:
// containerd 1.6 under load sometimes answers StopContainer with
// "ttrpc: closed" after its shim reported the kill; then the container's
// status decides, and a container still running is stopped again.
func stopContainer(ctx context.Context, rt cri.Runtime, id string, retries *atomic.Int64) error {
	err := rt.StopContainer(ctx, id, grace)
	if err == nil {
		return nil
	}
	retries.Add(1)
	st, serr := rt.ContainerStatus(ctx, id)
	if serr == nil && st.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
		return nil
	}
	if err2 := rt.StopContainer(ctx, id, grace); err2 != nil {
		return fmt.Errorf("stop container %q twice: %w; then %w", id, err, err2)
	}
	return nil
}

// Percentile returns the nearest-rank p-quantile (0 < p <= 1) of sorted
// values, 0 for none.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}
