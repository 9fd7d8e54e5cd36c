package criaudit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc"

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

// Recorder records every CRI call a client makes, through the gRPC
// interceptors it installs on the client (DialOption); the calls themselves
// go on unchanged. It is safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	records []Record  // NewRecorder
	w       io.Writer // NewLogRecorder
	buf     []byte
	err     error // first write error
}

// NewRecorder returns a recorder keeping every call in memory (Records).
func NewRecorder() *Recorder { return &Recorder{} }

// NewLogRecorder returns a recorder writing every call to w as one JSON line
// (a Record), in one Write per line; it keeps nothing in memory. ReadLog
// reads the lines back. A write error stops the logging (Err), never a call.
func NewLogRecorder(w io.Writer) *Recorder { return &Recorder{w: w} }

// DialOption is the cri.Dial option that makes the client's calls recorded
// by r. Several clients may share one recorder.
func (r *Recorder) DialOption() cri.Option { return cri.WithInterceptors(r.unary, r.stream) }

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

func (r *Recorder) record(ctx context.Context, rec Record) {
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

// unary records a call before it is made, but RunPodSandbox and
// CreateContainer when they return, with the id they returned or their
// error as the client returns it.
func (r *Recorder) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var rec Record
	switch q := req.(type) {
	case *runtimeapi.RunPodSandboxRequest:
		rec.Pod = q.GetConfig().GetMetadata().GetUid()
	case *runtimeapi.CreateContainerRequest:
		rec.Pod, rec.ID = q.GetSandboxConfig().GetMetadata().GetUid(), q.GetPodSandboxId()
	default:
		r.record(ctx, Record{Method: cri.Method(method), ID: callID(req)})
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	rec.Method = cri.Method(method)
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err != nil {
		rec.Err = cri.CallError(cc.Target(), method, req, err).Error()
	} else if res, ok := reply.(interface{ GetPodSandboxId() string }); ok {
		rec.Result = res.GetPodSandboxId()
	} else if res, ok := reply.(interface{ GetContainerId() string }); ok {
		rec.Result = res.GetContainerId()
	}
	r.record(ctx, rec)
	return err
}

// callID is the sandbox, container or image a call is about: the image of
// RemoveImage (not of the reads and pulls), the container or sandbox the
// request names.
func callID(req any) string {
	switch q := req.(type) {
	case *runtimeapi.RemoveImageRequest:
		return q.GetImage().GetImage()
	case interface{ GetContainerId() string }:
		return q.GetContainerId()
	case interface{ GetPodSandboxId() string }:
		return q.GetPodSandboxId()
	}
	return ""
}

// stream records a stream (GetContainerEvents) when it is opened.
func (r *Recorder) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	r.record(ctx, Record{Method: cri.Method(method)})
	return streamer(ctx, desc, cc, method, opts...)
}
