package cri

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Class is what the engine needs to know about a failed runtime call in
// order to act on it. Classes are decided here, once, from the gRPC status
// the runtime returned; nothing above this package inspects gRPC codes or
// error text.
type Class int

const (
	// ClassOther is any failure that has no class of its own. The engine
	// retries it with backoff.
	ClassOther Class = iota
	// ClassNotFound: the sandbox, container or image id is unknown to the
	// runtime (already removed, or never created).
	ClassNotFound
	// ClassUnavailable: the runtime cannot be reached (wrong socket path,
	// runtime down or restarting).
	ClassUnavailable
	// ClassDeadlineExceeded: the call did not finish within its deadline.
	ClassDeadlineExceeded
	// ClassImageNotFound: PullImage failed because the image (or its tag)
	// does not exist in the registry.
	ClassImageNotFound
	// ClassUnimplemented: the runtime does not implement the call.
	ClassUnimplemented
)

// String returns the class as it appears in error messages.
func (c Class) String() string {
	switch c {
	case ClassNotFound:
		return "not found"
	case ClassUnavailable:
		return "unavailable"
	case ClassDeadlineExceeded:
		return "deadline exceeded"
	case ClassImageNotFound:
		return "image not found"
	case ClassUnimplemented:
		return "unimplemented"
	default:
		return "error"
	}
}

// Error is a failed CRI call. Every error returned by the gRPC client is an
// *Error. Its message names the endpoint, the call and the object the call
// was about, e.g.
//
//	cri unix:///run/containerd.sock: StartContainer "4f1c": not found: container "4f1c" does not exist
type Error struct {
	Endpoint string // the runtime endpoint, e.g. "unix:///run/containerd/containerd.sock"
	Op       string // the CRI method name, e.g. "StartContainer"
	ID       string // the sandbox id, container id or image the call was about; "" for none
	Class    Class
	Err      error // the error returned by gRPC (a status error) or by the client itself
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("cri ")
	b.WriteString(e.Endpoint)
	b.WriteString(": ")
	b.WriteString(e.Op)
	if e.ID != "" {
		fmt.Fprintf(&b, " %q", e.ID)
	}
	b.WriteString(": ")
	if e.Class != ClassOther {
		b.WriteString(e.Class.String())
		b.WriteString(": ")
	}
	if e.Err == nil {
		b.WriteString("unknown error")
	} else if s, ok := status.FromError(e.Err); ok {
		b.WriteString(s.Message())
	} else {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying gRPC or client error.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, context.DeadlineExceeded) and
// errors.Is(err, context.Canceled) true for calls that ended that way.
func (e *Error) Is(target error) bool {
	switch target {
	case context.DeadlineExceeded:
		return e.Class == ClassDeadlineExceeded
	case context.Canceled:
		return status.Code(e.Err) == codes.Canceled
	}
	return false
}

// ClassOf returns the class of err: the Class of an *Error in its chain, or
// the class of a bare gRPC status error or context error. ClassOf(nil) is
// ClassOther; check err != nil first.
func ClassOf(err error) Class {
	if err == nil {
		return ClassOther
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return classify("", err)
}

// IsNotFound reports whether err is of class ClassNotFound.
func IsNotFound(err error) bool { return err != nil && ClassOf(err) == ClassNotFound }

// UnlessGone is the error of a stop or removal, what, that err reports:
// nil where err is nil or says the runtime does not know the object (it is
// gone already, so stopped and removed), else err wrapped with what.
func UnlessGone(err error, what string) error {
	if err == nil || IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// IsUnavailable reports whether err is of class ClassUnavailable.
func IsUnavailable(err error) bool { return err != nil && ClassOf(err) == ClassUnavailable }

// IsDeadlineExceeded reports whether err is of class ClassDeadlineExceeded.
func IsDeadlineExceeded(err error) bool {
	return err != nil && ClassOf(err) == ClassDeadlineExceeded
}

// IsImageNotFound reports whether err is of class ClassImageNotFound.
func IsImageNotFound(err error) bool { return err != nil && ClassOf(err) == ClassImageNotFound }

// IsUnimplemented reports whether err is of class ClassUnimplemented.
func IsUnimplemented(err error) bool { return err != nil && ClassOf(err) == ClassUnimplemented }

// imageNotFoundText are fragments of the messages registries and containerd
// use when a pulled reference does not exist. containerd 1.6 wraps its
// resolver's errdefs.ErrNotFound ("failed to resolve reference ...: not
// found") and returns it as codes.NotFound, or as codes.Unknown when the
// wrapping loses the error type; registries answer "manifest unknown" or
// "name unknown" for a missing tag or repository.
var imageNotFoundText = []string{
	": not found",
	"manifest unknown",
	"name unknown",
	"repository does not exist",
}

// classify decides the class of an error returned for call op.
func classify(op string, err error) Class {
	if errors.Is(err, context.DeadlineExceeded) {
		return ClassDeadlineExceeded
	}
	s, ok := status.FromError(err)
	if !ok {
		return ClassOther
	}
	switch s.Code() {
	case codes.NotFound:
		if op == "PullImage" {
			return ClassImageNotFound
		}
		return ClassNotFound
	case codes.Unavailable:
		return ClassUnavailable
	case codes.DeadlineExceeded:
		return ClassDeadlineExceeded
	case codes.Unimplemented:
		return ClassUnimplemented
	case codes.Unknown:
		if op == "PullImage" {
			msg := strings.ToLower(s.Message())
			for _, t := range imageNotFoundText {
				if strings.Contains(msg, t) {
					return ClassImageNotFound
				}
			}
		}
	}
	return ClassOther
}

// wrap turns an error returned by a call into an *Error; nil stays nil.
func wrap(endpoint, op, id string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Endpoint: endpoint, Op: op, ID: id, Class: classify(op, err), Err: err}
}

// CallError returns the error the client returns for a gRPC call that
// failed with err (nil for nil): an *Error naming the endpoint, the CRI
// method of fullMethod and the object req is about. An interceptor
// (WithInterceptors, cc.Target() the endpoint) uses it to see a failure as
// the client's caller does.
func CallError(endpoint, fullMethod string, req any, err error) error {
	return wrap(endpoint, Method(fullMethod), callID(req), err)
}

// callID is the id an *Error names for a request, as the client's methods
// name it: the sandbox a RunPodSandbox creates ("namespace/name"), the
// sandbox and name of a container a CreateContainer creates, the image,
// container or sandbox of the others; "" for lists and the runtime's
// calls.
func callID(req any) string {
	switch r := req.(type) {
	case *runtimeapi.RunPodSandboxRequest:
		return sandboxName(r.GetConfig())
	case *runtimeapi.CreateContainerRequest:
		return r.GetPodSandboxId() + "/" + r.GetConfig().GetMetadata().GetName()
	case interface{ GetImage() *runtimeapi.ImageSpec }:
		return r.GetImage().GetImage()
	case interface{ GetContainerId() string }:
		return r.GetContainerId()
	case interface{ GetPodSandboxId() string }:
		return r.GetPodSandboxId()
	}
	return ""
}

// reservedRE matches containerd's answer to a create whose name (pod name,
// namespace, UID and attempt; or container name and attempt in its sandbox)
// is already taken: `failed to reserve sandbox name "N": name "N" is
// reserved for "ID"`.
var reservedRE = regexp.MustCompile(`failed to reserve (?:sandbox|container) name .*is reserved for \\?"([0-9a-f]{64})\\?"`)

// ReservedFor returns the ID of the object a RunPodSandbox or
// CreateContainer found under its name, or "". The name holds the attempt,
// so that object is the one an earlier call of the same request created
// while its answer was lost (a reply cut by a runtime restart, a timeout),
// or is still creating.
func ReservedFor(err error) string {
	if err == nil {
		return ""
	}
	if m := reservedRE.FindStringSubmatch(err.Error()); m != nil {
		return m[1]
	}
	return ""
}

// RuntimeMessage is the text of a failed call as kubelet's CRI client
// (k8s.io/cri-client remoteImageService, v0.34) hands it to kubelet, which
// quotes it in its events and waiting messages: a PullImage that failed
// with gRPC code Unknown gives the runtime's message alone; every other
// failure the status error's text, `rpc error: code = NotFound desc =
// ...`. The failures of several calls in err (one PullImage per pull
// credential) are joined as kubelet's error aggregate joins them: the text
// of one alone, else the distinct texts as `[a, b]`. An error holding no
// *Error gives its own text.
func RuntimeMessage(err error) string {
	if err == nil {
		return ""
	}
	var texts []string
	for _, e := range callErrors(err) {
		t := e.Error()
		if e.Err != nil {
			t = e.Err.Error()
			if s, ok := status.FromError(e.Err); ok && e.Op == "PullImage" && s.Code() == codes.Unknown {
				t = s.Message()
			}
		}
		if !slices.Contains(texts, t) {
			texts = append(texts, t)
		}
	}
	switch len(texts) {
	case 0:
		return err.Error()
	case 1:
		return texts[0]
	}
	return "[" + strings.Join(texts, ", ") + "]"
}

// callErrors returns the *Errors in err's tree, in order.
func callErrors(err error) []*Error {
	if e, ok := err.(*Error); ok {
		return []*Error{e}
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			return callErrors(inner)
		}
	case interface{ Unwrap() []error }:
		var out []*Error
		for _, inner := range u.Unwrap() {
			out = append(out, callErrors(inner)...)
		}
		return out
	}
	return nil
}
