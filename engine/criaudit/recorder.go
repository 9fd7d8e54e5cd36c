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
// Under a handler of a caller outside the machines (spec/callers.hcl),
// Machine is the caller and Action the handler.
type Record struct {
	Method  string `json:"method"`
	Machine string `json:"machine,omitempty"`
	Action  string `json:"action,omitempty"`
	// Pod is the pod UID a RunPodSandbox or CreateContainer request
	// names; ID the sandbox or container a call is about; Result the ID
	// that RunPodSandbox or CreateContainer returned (those two are
	// recorded when they return, the others before the call). With them a
	// reader of the log can follow the calls of each pod (IDs map to the
	// pod of the call that created them).
	Pod    string `json:"pod,omitempty"`
	ID     string `json:"id,omitempty"`
	Result string `json:"result,omitempty"`
	// Err is the error of a RunPodSandbox or CreateContainer that failed.
	Err string `json:"err,omitempty"`
}

// Recorder is a cri.Full that records every call before forwarding it,
// unchanged, to the runtime it wraps. It is safe for concurrent use.
type Recorder struct {
	rt cri.Full

	mu      sync.Mutex
	records []Record  // NewRecorder
	w       io.Writer // NewLogRecorder
	buf     []byte
	err     error // first write error
}

var _ cri.Full = (*Recorder)(nil)

// NewRecorder returns rt recording every call in memory (Records).
func NewRecorder(rt cri.Full) *Recorder { return &Recorder{rt: rt} }

// NewLogRecorder returns rt writing every call to w as one JSON line (a
// Record), in one Write per line; it keeps nothing in memory. ReadLog reads
// the lines back. A write error stops the logging (Err), never a call.
func NewLogRecorder(rt cri.Full, w io.Writer) *Recorder { return &Recorder{rt: rt, w: w} }

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
	r.recordFull(ctx, Record{Method: method})
}

func (r *Recorder) recordID(ctx context.Context, method, id string) {
	r.recordFull(ctx, Record{Method: method, ID: id})
}

func (r *Recorder) recordFull(ctx context.Context, rec Record) {
	rec.Machine, rec.Action, _ = fsm.ActionFrom(ctx)
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
	id, err := r.rt.RunPodSandbox(ctx, config, runtimeHandler)
	rec := Record{Method: "RunPodSandbox", Pod: config.GetMetadata().GetUid(), Result: id}
	if err != nil {
		rec.Err = err.Error()
	}
	r.recordFull(ctx, rec)
	return id, err
}

func (r *Recorder) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	r.recordID(ctx, "StopPodSandbox", podSandboxID)
	return r.rt.StopPodSandbox(ctx, podSandboxID)
}

func (r *Recorder) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	r.recordID(ctx, "RemovePodSandbox", podSandboxID)
	return r.rt.RemovePodSandbox(ctx, podSandboxID)
}

func (r *Recorder) PodSandboxStatus(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStatus, error) {
	r.recordID(ctx, "PodSandboxStatus", podSandboxID)
	return r.rt.PodSandboxStatus(ctx, podSandboxID)
}

func (r *Recorder) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	r.record(ctx, "ListPodSandbox")
	return r.rt.ListPodSandbox(ctx, filter)
}

func (r *Recorder) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	id, err := r.rt.CreateContainer(ctx, podSandboxID, config, sandboxConfig)
	rec := Record{Method: "CreateContainer", Pod: sandboxConfig.GetMetadata().GetUid(), ID: podSandboxID, Result: id}
	if err != nil {
		rec.Err = err.Error()
	}
	r.recordFull(ctx, rec)
	return id, err
}

func (r *Recorder) StartContainer(ctx context.Context, containerID string) error {
	r.recordID(ctx, "StartContainer", containerID)
	return r.rt.StartContainer(ctx, containerID)
}

func (r *Recorder) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	r.recordID(ctx, "StopContainer", containerID)
	return r.rt.StopContainer(ctx, containerID, timeout)
}

func (r *Recorder) RemoveContainer(ctx context.Context, containerID string) error {
	r.recordID(ctx, "RemoveContainer", containerID)
	return r.rt.RemoveContainer(ctx, containerID)
}

func (r *Recorder) ContainerStatus(ctx context.Context, containerID string) (*runtimeapi.ContainerStatus, error) {
	r.recordID(ctx, "ContainerStatus", containerID)
	return r.rt.ContainerStatus(ctx, containerID)
}

func (r *Recorder) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.record(ctx, "ListContainers")
	return r.rt.ListContainers(ctx, filter)
}

func (r *Recorder) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (cri.ExecResult, error) {
	r.recordID(ctx, "ExecSync", containerID)
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

func (r *Recorder) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	r.recordID(ctx, "RemoveImage", image.GetImage())
	return r.rt.RemoveImage(ctx, image)
}

func (r *Recorder) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	r.record(ctx, "ImageFsInfo")
	return r.rt.ImageFsInfo(ctx)
}

func (r *Recorder) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	r.record(ctx, "ListContainerStats")
	return r.rt.ListContainerStats(ctx, filter)
}

func (r *Recorder) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (string, error) {
	r.recordID(ctx, "Exec", req.GetContainerId())
	return r.rt.Exec(ctx, req)
}

func (r *Recorder) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (string, error) {
	r.recordID(ctx, "Attach", req.GetContainerId())
	return r.rt.Attach(ctx, req)
}

func (r *Recorder) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (string, error) {
	r.recordID(ctx, "PortForward", req.GetPodSandboxId())
	return r.rt.PortForward(ctx, req)
}

func (r *Recorder) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	r.record(ctx, "ListPodSandboxStats")
	return r.rt.ListPodSandboxStats(ctx, filter)
}

func (r *Recorder) ReopenContainerLog(ctx context.Context, containerID string) error {
	r.recordID(ctx, "ReopenContainerLog", containerID)
	return r.rt.ReopenContainerLog(ctx, containerID)
}
