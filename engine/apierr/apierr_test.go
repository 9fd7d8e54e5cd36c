package apierr

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestDescribeNamesTheCause: a refused connection, a 401 and a 403 are
// each named plainly.
func TestDescribeNamesTheCause(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&wrapped{syscall.ECONNREFUSED}, "the API server is unreachable"},
		{apierrors.NewUnauthorized("Unauthorized"), "refused the node's credentials (401 Unauthorized"},
		{apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n", errors.New("no")), "forbids it (403"},
	} {
		if got := Describe(tt.err).Error(); !strings.Contains(got, tt.want) {
			t.Errorf("Describe(%v) = %q, want it to say %q", tt.err, got, tt.want)
		}
	}
}

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "dial tcp 127.0.0.1:1: connect: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

// TestOnceAndClientErrorsLogARunOnce: twenty failures of one kind are one
// error line; another kind is a second; a success ends the run.
func TestOnceAndClientErrorsLogARunOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	o := &Once{Log: log, What: "write pod status"}
	h := ClientErrors(log)
	refused := &wrapped{syscall.ECONNREFUSED}
	for range 20 {
		o.Fail(refused)
		h(context.Background(), refused, "Failed to watch", "reflector", "pods")
	}
	if n := strings.Count(buf.String(), "level=ERROR"); n != 2 {
		t.Errorf("%d error lines for 20 failures of 2 activities, want 2:\n%s", n, buf.String())
	}
	o.Fail(apierrors.NewUnauthorized("Unauthorized"))
	o.OK()
	if n := strings.Count(buf.String(), "level=ERROR"); n != 3 {
		t.Errorf("%d error lines after a new kind, want 3:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "write pod status succeeds again") {
		t.Errorf("no line says the writes succeed again:\n%s", buf.String())
	}
}
