package criaudit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/fsm"
)

// Record is one CRI call: the method and the action (spec names) whose
// context it was made with; Machine and Action are empty outside actions.
type Record struct {
	Method  string `json:"method"`
	Machine string `json:"machine,omitempty"`
	Action  string `json:"action,omitempty"`
}

// Recorder is a cri.Runtime that records every call before forwarding it,
// unchanged, to the runtime it wraps. It is safe for concurrent use.
type Recorder struct {
	rt cri.Runtime

	mu      sync.Mutex
	records []Record  // NewRecorder
	w       io.Writer // NewLogRecorder
	buf     []byte
	err     error // first write error
}

var _ cri.Runtime = (*Recorder)(nil)

// NewRecorder returns rt recording every call in memory (Records).
func NewRecorder(rt cri.Runtime) *Recorder { return &Recorder{rt: rt} }

// NewLogRecorder returns rt writing every call to w as one JSON line (a
// Record), in one Write per line; it keeps nothing in memory. ReadLog reads
// the lines back. A write error stops the logging (Err), never a call.
func NewLogRecorder(rt cri.Runtime, w io.Writer) *Recorder { return &Recorder{rt: rt, w: w} }

// Records returns a copy of the records kept so far (NewRecorder).
func (r *Recorder) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.records...)
}

// Err returns the first error writing the log (NewLogRecorder), if any.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *Recorder) record(ctx context.Context, method string) {
	machine, action, _ := fsm.ActionFrom(ctx)
	rec := Record{Method: method, Machine: machine, Action: action}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w == nil {
		r.records = append(r.records, rec)
		return
	}
	if r.err != nil {
		return
	}
	b, err := json.Marshal(rec)
	if err == nil {
		r.buf = append(append(r.buf[:0], b...), '\n')
		_, err = r.w.Write(r.buf)
	}
	if err != nil {
		r.err = fmt.Errorf("cri audit log: %w", err)
	}
}

// ReadLog reads the JSON lines a NewLogRecorder wrote. Blank lines are
// skipped; a line that is not a Record is an error naming its number.
func ReadLog(rd io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil || rec.Method == "" {
			if err == nil {
				err = fmt.Errorf("no method")
			}
			return out, fmt.Errorf("cri audit log line %d: %w", n, err)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

func (r *Recorder) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	r.record(ctx, "Version")
	return r.rt.Version(ctx)
}

func (r *Recorder) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	r.record(ctx, "Status")
	return r.rt.Status(ctx, verbose)
}

func (r *Recorder) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	r.record(ctx, "RunPodSandbox")
	return r.rt.RunPodSandbox(ctx, config, runtimeHandler)
}

func (r *Recorder) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	r.record(ctx, "StopPodSandbox")
	return r.rt.StopPodSandbox(ctx, podSandboxID)
}

func (r *Recorder) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	r.record(ctx, "RemovePodSandbox")
	return r.rt.RemovePodSandbox(ctx, podSandboxID)
}

func (r *Recorder) PodSandboxStatus(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStatus, error) {
	r.record(ctx, "PodSandboxStatus")
	return r.rt.PodSandboxStatus(ctx, podSandboxID)
}

func (r *Recorder) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	r.record(ctx, "ListPodSandbox")
	return r.rt.ListPodSandbox(ctx, filter)
}

func (r *Recorder) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	r.record(ctx, "CreateContainer")
	return r.rt.CreateContainer(ctx, podSandboxID, config, sandboxConfig)
}

func (r *Recorder) StartContainer(ctx context.Context, containerID string) error {
	r.record(ctx, "StartContainer")
	return r.rt.StartContainer(ctx, containerID)
}

func (r *Recorder) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	r.record(ctx, "StopContainer")
	return r.rt.StopContainer(ctx, containerID, timeout)
}

func (r *Recorder) RemoveContainer(ctx context.Context, containerID string) error {
	r.record(ctx, "RemoveContainer")
	return r.rt.RemoveContainer(ctx, containerID)
}

func (r *Recorder) ContainerStatus(ctx context.Context, containerID string) (*runtimeapi.ContainerStatus, error) {
	r.record(ctx, "ContainerStatus")
	return r.rt.ContainerStatus(ctx, containerID)
}

func (r *Recorder) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.record(ctx, "ListContainers")
	return r.rt.ListContainers(ctx, filter)
}

func (r *Recorder) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (cri.ExecResult, error) {
	r.record(ctx, "ExecSync")
	return r.rt.ExecSync(ctx, containerID, cmd, timeout)
}

func (r *Recorder) GetContainerEvents(ctx context.Context, ch chan<- *runtimeapi.ContainerEventResponse) error {
	r.record(ctx, "GetContainerEvents")
	return r.rt.GetContainerEvents(ctx, ch)
}

func (r *Recorder) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	r.record(ctx, "PullImage")
	return r.rt.PullImage(ctx, image, auth, sandboxConfig)
}

func (r *Recorder) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	r.record(ctx, "ImageStatus")
	return r.rt.ImageStatus(ctx, image)
}

func (r *Recorder) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	r.record(ctx, "ListImages")
	return r.rt.ListImages(ctx, filter)
}
