package cri

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		name string
		op   string
		err  error
		want Class
	}{
		{"unknown container id", "ContainerStatus", status.Error(codes.NotFound, `an error occurred when try to find container "abc": not found`), ClassNotFound},
		{"unknown sandbox id", "StopPodSandbox", status.Error(codes.NotFound, `an error occurred when try to find sandbox: not found`), ClassNotFound},
		// containerd 1.6, measured: a reference the registry lacks.
		{"missing image, containerd 1.6", "PullImage", status.Error(codes.NotFound, `failed to pull and unpack image "127.0.0.1:5000/nosuch:latest": failed to resolve reference "127.0.0.1:5000/nosuch:latest": 127.0.0.1:5000/nosuch:latest: not found`), ClassImageNotFound},
		{"missing image, wrapped as Unknown", "PullImage", status.Error(codes.Unknown, `failed to pull and unpack image "x:1": failed to resolve reference "x:1": x:1: not found`), ClassImageNotFound},
		{"missing tag, registry text", "PullImage", status.Error(codes.Unknown, `failed to pull image "x:1": manifest unknown: manifest unknown`), ClassImageNotFound},
		{"registry unreachable is not a missing image", "PullImage", status.Error(codes.Unknown, `failed to pull and unpack image "127.0.0.1:1/x:1": failed to resolve reference "127.0.0.1:1/x:1": failed to do request: Head "http://127.0.0.1:1/v2/x/manifests/1": dial tcp 127.0.0.1:1: connect: connection refused`), ClassOther},
		{"'not found' text outside PullImage", "StartContainer", status.Error(codes.Unknown, `exec: "nosuch": executable file not found in $PATH: not found`), ClassOther},
		{"wrong socket", "Version", status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix /x.sock: connect: no such file or directory"`), ClassUnavailable},
		{"deadline", "StopContainer", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), ClassDeadlineExceeded},
		{"bare context deadline", "StopContainer", fmt.Errorf("wait: %w", context.DeadlineExceeded), ClassDeadlineExceeded},
		{"unimplemented", "GetContainerEvents", status.Error(codes.Unimplemented, "method GetContainerEvents not implemented"), ClassUnimplemented},
		{"canceled", "ListContainers", status.Error(codes.Canceled, "context canceled"), ClassOther},
		{"plain error", "RunPodSandbox", errors.New("boom"), ClassOther},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := classify(c.op, c.err); got != c.want {
				t.Errorf("classify(%s, %v) = %v, want %v", c.op, c.err, got, c.want)
			}
			if got := ClassOf(fmt.Errorf("sync pod: %w", wrap("unix:///x.sock", c.op, "id", c.err))); got != c.want {
				t.Errorf("ClassOf(wrapped *Error) = %v, want %v", got, c.want)
			}
		})
	}
}

func TestErrorMessageNamesEndpointCallAndObject(t *testing.T) {
	err := wrap("unix:///run/x.sock", "StartContainer", "abc", status.Error(codes.NotFound, `container "abc" does not exist`))
	want := `cri unix:///run/x.sock: StartContainer "abc": not found: container "abc" does not exist`
	if err.Error() != want {
		t.Errorf("message\n got %s\nwant %s", err, want)
	}
	err = wrap("unix:///run/x.sock", "ListContainers", "", status.Error(codes.Internal, "disk full"))
	if want := `cri unix:///run/x.sock: ListContainers: disk full`; err.Error() != want {
		t.Errorf("message\n got %s\nwant %s", err, want)
	}
	if wrap("e", "Version", "", nil) != nil {
		t.Error("wrap(nil) is not nil")
	}
}

func TestErrorIsContextErrors(t *testing.T) {
	dl := wrap("e", "StopContainer", "c", status.Error(codes.DeadlineExceeded, "context deadline exceeded"))
	if !errors.Is(dl, context.DeadlineExceeded) || errors.Is(dl, context.Canceled) {
		t.Errorf("deadline error: Is(DeadlineExceeded) %v Is(Canceled) %v", errors.Is(dl, context.DeadlineExceeded), errors.Is(dl, context.Canceled))
	}
	cn := wrap("e", "StopContainer", "c", status.Error(codes.Canceled, "context canceled"))
	if !errors.Is(cn, context.Canceled) || errors.Is(cn, context.DeadlineExceeded) {
		t.Errorf("canceled error: Is(Canceled) %v Is(DeadlineExceeded) %v", errors.Is(cn, context.Canceled), errors.Is(cn, context.DeadlineExceeded))
	}
	if s, ok := status.FromError(cn); !ok || s.Code() != codes.Canceled {
		t.Errorf("the gRPC status is not reachable through the *Error: %v %v", s, ok)
	}
}

func TestHelpers(t *testing.T) {
	for _, c := range []struct {
		class Class
		is    func(error) bool
	}{
		{ClassNotFound, IsNotFound},
		{ClassUnavailable, IsUnavailable},
		{ClassDeadlineExceeded, IsDeadlineExceeded},
		{ClassImageNotFound, IsImageNotFound},
		{ClassUnimplemented, IsUnimplemented},
	} {
		if !c.is(&Error{Class: c.class, Err: errors.New("x")}) {
			t.Errorf("Is%v is false for its own class", c.class)
		}
		if c.is(&Error{Class: ClassOther, Err: errors.New("x")}) || c.is(nil) {
			t.Errorf("Is%v is true for another class or nil", c.class)
		}
	}
}

func TestEndpoints(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"unix:///run/containerd/containerd.sock", "unix:///run/containerd/containerd.sock", ""},
		{"/run/crio/crio.sock", "unix:///run/crio/crio.sock", ""},
		{"tcp://127.0.0.1:1234", "", `cri endpoint "tcp://127.0.0.1:1234": only unix:// endpoints are supported`},
		{"run/x.sock", "", `cri endpoint "run/x.sock": want an absolute socket path, as in unix:///run/containerd/containerd.sock`},
		{"unix://x.sock", "", `cri endpoint "unix://x.sock": want an absolute socket path, as in unix:///run/containerd/containerd.sock`},
	} {
		c2, err := Dial(context.Background(), c.in)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("Dial(%q) error %v, want %s", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Dial(%q): %v", c.in, err)
			continue
		}
		if c2.Endpoint() != c.want {
			t.Errorf("Dial(%q).Endpoint() = %q, want %q", c.in, c2.Endpoint(), c.want)
		}
		_ = c2.Close()
	}
}

func TestRuntimeMessage(t *testing.T) {
	notFound := status.Error(codes.NotFound, `failed to pull and unpack image "r/x:1": failed to resolve reference "r/x:1": r/x:1: not found`)
	refused := status.Error(codes.Unknown, `failed to pull and unpack image "r/x:1": dial tcp 127.0.0.1:1: connect: connection refused`)
	pull := func(err error) error { return wrap("unix:///x.sock", "PullImage", "r/x:1", err) }
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"a code other than Unknown keeps kubelet's rpc error text", fmt.Errorf("pull: %w", pull(notFound)),
			`rpc error: code = NotFound desc = failed to pull and unpack image "r/x:1": failed to resolve reference "r/x:1": r/x:1: not found`},
		{"Unknown on PullImage: the runtime's message alone", pull(refused),
			`failed to pull and unpack image "r/x:1": dial tcp 127.0.0.1:1: connect: connection refused`},
		{"Unknown on ImageStatus keeps the code", wrap("unix:///x.sock", "ImageStatus", "r/x:1", status.Error(codes.Unknown, "disk")),
			`rpc error: code = Unknown desc = disk`},
		{"one pull per credential, the same failure twice", fmt.Errorf("pull: %w", errors.Join(pull(refused), pull(refused))),
			`failed to pull and unpack image "r/x:1": dial tcp 127.0.0.1:1: connect: connection refused`},
		{"two different failures", errors.Join(pull(refused), pull(notFound)),
			`[failed to pull and unpack image "r/x:1": dial tcp 127.0.0.1:1: connect: connection refused, rpc error: code = NotFound desc = failed to pull and unpack image "r/x:1": failed to resolve reference "r/x:1": r/x:1: not found]`},
		{"no call error", errors.New("boom"), "boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := RuntimeMessage(c.err); got != c.want {
				t.Errorf("RuntimeMessage\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestUnlessGone: a stop or removal of an object the runtime no longer
// knows succeeded; any other failure is kept, named.
func TestUnlessGone(t *testing.T) {
	gone := &Error{Op: "RemoveContainer", Class: ClassNotFound, Err: errors.New("not found")}
	busy := &Error{Op: "RemoveContainer", Class: ClassOther, Err: errors.New("device busy")}
	if err := UnlessGone(nil, "remove container"); err != nil {
		t.Errorf("no error: %v", err)
	}
	if err := UnlessGone(gone, "remove container"); err != nil {
		t.Errorf("gone: %v, want nil", err)
	}
	err := UnlessGone(busy, `remove container "app"`)
	if !errors.Is(err, busy) || err.Error() != `remove container "app": `+busy.Error() {
		t.Errorf("busy: %v, want it wrapped with what was removed", err)
	}
}
